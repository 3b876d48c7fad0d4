// Package source is where the router's routing table comes from: a mounted
// file or folder (FileSource) or the routing ConfigMaps read through the
// Kubernetes API (ConfigMapSource).
//
// Every source keeps the last good table. A table that does not parse, has an
// unknown version or fails validation is refused: it is logged, reported to the
// Observer with a reason, and the table that was serving keeps serving. Current
// is nil only until the first good table arrives.
//
// A source notifies subscribers when the table it serves changes, that is when
// its hash (table.Hash of the rendered table) changes; reading the same table
// again notifies nobody.
//
// This package imports nothing from the operator: router pods run without the
// operator's types.
package source
