# regionwarden: keep LLM traffic routed by the capacity that was really bought.

# Tool versions, pinned. Tools are built from the Go module proxy into bin/.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0

LOCALBIN ?= $(shell pwd)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Go test flags; TEST_PKGS narrows the packages (default: all).
TEST_PKGS ?= ./...
TEST_FLAGS ?= -count=1 -timeout 25m
# Packages whose tests replay scenarios on a compressed real clock: make test
# runs them after the others, alone, so that other packages' tests do not take
# the CPU their load generators need to keep their schedule.
TIMED_PKGS := github.com/regionwarden/regionwarden/internal/replay
# Packages whose code runs concurrently in production, the router's and the
# operator's: make test-race runs their tests with the race detector (it
# needs cgo: the machine's gcc). Not part of make test: on a new 2-core
# machine the race build of their dependencies alone takes about 9 minutes:
# added to make test, it would take a new machine past its 30-minute budget.
RACE_PKGS := github.com/regionwarden/regionwarden/(router(/.*)?|cmd/router|cmd/manager|controllers)
# Of those, the ones make test itself runs under the race detector: the
# routing policy's lock-free windows and limits, and the table, whose
# dependencies are the standard library's alone (their race build takes
# under a minute on 2 cores).
TEST_RACE_PKGS := github.com/regionwarden/regionwarden/router/(policy|table)

# Build flags of vet, test, bench and demo: those of the test control plane
# (hack/setup-envtest.sh), whose build requires this go.mod's module versions,
# so the packages both use (client-go, gRPC, protobuf, the standard library)
# compile once on a fresh machine. No DWARF: stack traces keep their files and
# lines, but a debugger needs GO_BUILD_FLAGS= (empty).
GO_BUILD_FLAGS ?= -trimpath -gcflags=all=-dwarf=false

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and RBAC from the API types and markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=true webhook paths="./api/..." paths="./controllers/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: generate
generate: controller-gen ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: docs
docs: manifests ## Generate the CRD reference (docs/crd-reference.md) from the CRDs.
	go run ./hack/crd-docs -o docs/crd-reference.md config/crd/bases/*.yaml

.PHONY: chart-crds
chart-crds: manifests ## Copy the CRDs into the Helm chart (charts/regionwarden/crds), where Helm installs them from.
	rm -f charts/regionwarden/crds/*.yaml
	cp config/crd/bases/*.yaml charts/regionwarden/crds/

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet $(GO_BUILD_FLAGS) ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: prometheus-rule
prometheus-rule: ## Generate config/prometheus/prometheusrule.yaml from the alert rules in config/prometheus/rules.yaml.
	@hack/prometheus-rule.sh

.PHONY: verify
verify: generate manifests docs chart-crds prometheus-rule ## Regenerate code, manifests, the CRD reference, the chart's CRDs and the PrometheusRule; fail if the committed tree differs.
	@hack/verify-clean.sh api config docs/crd-reference.md charts/regionwarden/crds

.PHONY: envtest
envtest: ## Build (once) the test control plane: kube-apiserver and etcd from Go sources.
	@hack/setup-envtest.sh >/dev/null

.PHONY: test
test: vet prometheus redis ## Run the tests against a real kube-apiserver and etcd (built on first use), the alert rules with promtool, and the share exchange with a real Redis server.
	@assets="$$(hack/setup-envtest.sh)" && pkgs="$$(go list $(TEST_PKGS))" && \
	rest="$$(echo "$$pkgs" | grep -vx '$(TIMED_PKGS)' | grep -vxE '$(TEST_RACE_PKGS)' || true)" && \
	raced="$$(echo "$$pkgs" | grep -xE '$(TEST_RACE_PKGS)' || true)" && \
	timed="$$(echo "$$pkgs" | grep -x '$(TIMED_PKGS)' || true)" && \
	if [ -n "$$rest" ]; then echo "go test $(TEST_FLAGS) <$$(echo "$$rest" | wc -l) packages>"; \
		KUBEBUILDER_ASSETS="$$assets" go test $(GO_BUILD_FLAGS) $(TEST_FLAGS) $$rest; fi && \
	if [ -n "$$raced" ]; then echo "go test -race $(TEST_FLAGS) $$(echo $$raced)"; \
		CGO_ENABLED=1 go test -race $(GO_BUILD_FLAGS) $(TEST_FLAGS) $$raced; fi && \
	if [ -n "$$timed" ]; then echo "go test $(TEST_FLAGS) $$timed (alone: its replays run on a real clock)"; \
		KUBEBUILDER_ASSETS="$$assets" go test $(GO_BUILD_FLAGS) $(TEST_FLAGS) $$timed; fi

.PHONY: test-race
test-race: prometheus redis ## Run the router's and the operator's tests under the race detector (about 9 minutes more to build on 2 cores).
	@assets="$$(hack/setup-envtest.sh)" && \
	raced="$$(go list $(TEST_PKGS) | grep -xE '$(RACE_PKGS)' || true)" && \
	if [ -n "$$raced" ]; then echo "go test -race $(TEST_FLAGS) <$$(echo "$$raced" | wc -l) packages of the router and the operator>"; \
		KUBEBUILDER_ASSETS="$$assets" CGO_ENABLED=1 go test -race $(GO_BUILD_FLAGS) $(TEST_FLAGS) $$raced; fi

.PHONY: bench
bench: ## Run the benchmarks and print their numbers.
	KUBEBUILDER_ASSETS="$$(hack/setup-envtest.sh)" go test $(GO_BUILD_FLAGS) -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(TEST_PKGS)

.PHONY: replay
replay: ## Replay the incident scenarios against every policy; rewrite docs/replays.md and docs/replays/*.png.
	go run ./cmd/replay --scenarios test/scenarios --out docs/replays.md --charts docs/replays

##@ Demo

# make demo KUBECONFIG=path runs the demo against that cluster (kind, k3d, ...)
# instead of building and starting a local control plane. Only a KUBECONFIG
# given on make's command line counts: one that is merely set in the
# environment is ignored, so the demo never touches a cluster by accident.
DEMO_KUBECONFIG := $(if $(filter command line,$(origin KUBECONFIG)),$(KUBECONFIG))

.PHONY: demo
demo: prometheus ## Bring regionwarden up (control plane, emulated regions, operator, router, Prometheus) and replay the incident through it; KUBECONFIG=path uses that cluster instead of a local control plane.
ifeq ($(DEMO_KUBECONFIG),)
	@KUBEBUILDER_ASSETS="$$(hack/setup-envtest.sh)" && \
	go build $(GO_BUILD_FLAGS) -o $(LOCALBIN)/ ./cmd/manager ./cmd/router && \
	KUBEBUILDER_ASSETS="$$KUBEBUILDER_ASSETS" go run $(GO_BUILD_FLAGS) ./hack/demo $(DEMO_FLAGS)
else
	@go build $(GO_BUILD_FLAGS) -o $(LOCALBIN)/ ./cmd/manager ./cmd/router && \
	go run $(GO_BUILD_FLAGS) ./hack/demo --cluster="$(DEMO_KUBECONFIG)" $(DEMO_FLAGS)
endif

##@ Build

.PHONY: build
build: ## Build the manager, router and emulator binaries into bin/.
	go build -o $(LOCALBIN)/ ./cmd/...

.PHONY: run
run: manifests generate ## Run the manager against the cluster in the current kubeconfig.
	go run ./cmd/manager

##@ Tools

.PHONY: prometheus
prometheus: ## Install Prometheus and promtool (Debian's prometheus package) when they are missing.
	@hack/install-package.sh prometheus promtool prometheus

.PHONY: redis
redis: ## Install redis-server (Debian's redis-server package) when it is missing; Valkey works too, as redis-server on the PATH.
	@hack/install-package.sh redis-server redis-server

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT):
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

# go-install-tool installs a pinned Go tool into bin/ under a versioned name,
# so a version bump in this file installs the new version.
define go-install-tool
@[ -f "$(1)" ] || { \
set -e; \
package=$(2)@$(3) ;\
echo "Installing $${package}" ;\
rm -f "$(1)" ;\
GOBIN="$(LOCALBIN)" go install $${package} ;\
mv "$(LOCALBIN)/$$(basename $(2))" "$(1)" ;\
}
endef

##@ Deployment

IMG_REGISTRY ?= regionwarden
IMG_TAG ?= latest
KUBECTL ?= kubectl

.PHONY: docker-build
docker-build: ## Build the manager and router images (needs a Docker engine).
	docker build -f build/manager.Dockerfile -t $(IMG_REGISTRY)/manager:$(IMG_TAG) .
	docker build -f build/router.Dockerfile -t $(IMG_REGISTRY)/router:$(IMG_TAG) .

.PHONY: install
install: manifests ## Install the CRDs into the cluster in the current kubeconfig.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs (and with them every ProvisionedThroughput and RegionPool).
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the CRDs, the operator and the routers (config/default).
	$(KUBECTL) apply --server-side -k config/default

.PHONY: undeploy
undeploy: ## Remove what deploy applied.
	$(KUBECTL) delete --ignore-not-found -k config/default
