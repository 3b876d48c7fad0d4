// Package monitoring holds no code: its tests check what config/prometheus
// and config/grafana ship. promtool runs the alert rules' unit tests, every
// alert has a test that fires it and a runbook section, and every series an
// alert or a dashboard query names is one the router or the operator exports,
// with the labels it uses.
package monitoring
