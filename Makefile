# aigw — see README.md. Every target installs or builds what it needs when it is missing.
SHELL := /bin/bash
KUBECONFIG_DEV := $(CURDIR)/.aigw-dev/kubeconfig
CARGO ?= cargo

.PHONY: all build crds chart-check cluster cluster-down test lint unit integration health-test alerts-test chaos chaos-short chaos-sharded chaos-sharded-short integration-kube-1.30 cluster-down-1.30 image image-check readme demo bench bench-scale bench-emulator docs clean

all: build

build:
	$(CARGO) build --bins

## crds: regenerate crds/ (and the chart's copy) from the Rust types (a test fails when they drift)
crds:
	$(CARGO) run --quiet -- crds --out-dir crds
	$(CARGO) run --quiet -- crds --out-dir charts/aigw/crds

## readme: regenerate the README's reference section (every flag of `aigw … --help`, every spec
## field of crds/ with an example from the book's manifests; a test fails when it drifts)
readme:
	AIGW_WRITE_README=1 $(CARGO) test --test it -- docs::readme

## chart-check: lint and render the Helm chart, server-side dry run against the local cluster
chart-check:
	bash hack/chart-check.sh

## cluster: start the local control plane (kube-apiserver + etcd) and write .aigw-dev/kubeconfig
cluster:
	bash hack/cluster-up.sh

## cluster-down: stop the local control plane and remove its state
cluster-down:
	-bash hack/demo.sh stop
	bash hack/cluster-down.sh

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy --test chaos --test bench -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --lib

unit:
	$(CARGO) test --lib --bins

## integration: the tests under tests/it, one binary (they start the control plane themselves when
## it is not running). Ten at a time: they mostly wait on the apiserver and the operator, each in
## namespaces of its own (on 2 cores the default would be 2; six took about 390 s, ten 265 to
## 283 s; docs/src/development/tests.md).
TEST_THREADS ?= 10
integration: cluster
	$(CARGO) test --tests -- --test-threads=$(TEST_THREADS)

## test: everything CI runs: fmt, clippy, unit and integration tests (the docs book built and its
## links checked among them), and two short chaos rounds (one leader; three shards)
## The CRD check runs on the target/debug/aigw that `cargo test --no-run` built: `make image-check`'s
## `cargo build` would build most crates again (the dev-dependencies turn on features it does not).
test: lint
	$(CARGO) test --no-run
	bash hack/image.sh check-crds target/debug/aigw
	$(MAKE) cluster
	$(CARGO) test --all-targets -- --test-threads=$(TEST_THREADS)
	$(MAKE) health-test
	$(MAKE) alerts-test
	$(MAKE) chaos-short
	$(MAKE) chaos-sharded-short

## integration-kube-1.30: the integration tests on the oldest Kubernetes the chart supports
## (`kubeVersion: >=1.30`): kube-apiserver v1.30.14, built once into the cache like the default
## v1.35.4, on a control plane of its own in .aigw-dev-1.30 (left running; `make
## cluster-down-1.30` stops it). Not part of `make test`: run it before a release, or after a
## change to a CRD's rules or to what the operator asks of the apiserver
KUBE_1_30 := AIGW_KUBE_VERSION=1.30 AIGW_DEV_DIR=$(CURDIR)/.aigw-dev-1.30
integration-kube-1.30:
	$(KUBE_1_30) bash hack/cluster-up.sh
	$(KUBE_1_30) KUBECONFIG=$(CURDIR)/.aigw-dev-1.30/kubeconfig $(CARGO) test --test it -- --test-threads=$(TEST_THREADS)

cluster-down-1.30:
	$(KUBE_1_30) bash hack/cluster-down.sh

## health-test: the Argo CD health scripts under gopher-lua, and kstatus on the local apiserver
## (hack/health; the kstatus test starts the control plane itself when it is not running)
health-test:
	cd hack/health && GOFLAGS="-mod=mod -buildvcs=false" GOSUMDB=off GONOSUMDB='*' GOTOOLCHAIN=local go test -count=1 ./...

## alerts-test: the chart's alert rules under `promtool test rules` (hack/alerts/*_test.yaml; promtool
## is built from its Go module, hack/promtool, into ~/.cache/aigw once)
alerts-test:
	bash hack/alerts-test.sh

## chaos: exactly-once under 20 leader SIGKILLs, a leader paused past its lease (SIGSTOP),
## deletes during creates, an apiserver restart and emulator faults over 330 resources
## (tests/chaos.rs; about 12 minutes); prints one JSON summary line
chaos: cluster
	nice $(CARGO) test --test chaos -- --nocapture

## chaos-short: the same suite at 60 resources and 5 kills (one pause, deletes during creates,
## the apiserver restart): about 4 minutes, part of `make test`
chaos-short: cluster
	AIGW_CHAOS_CONFIGS=40 AIGW_CHAOS_POLICIES=10 AIGW_CHAOS_DEPLOYMENTS=10 AIGW_CHAOS_KILLS=5 \
		nice $(CARGO) test --test chaos -- --nocapture

## chaos-sharded: the same suite with 3 active-active replicas (--shards) over 6 namespaces: a
## random replica SIGKILLed each round, one added and one removed (SIGTERM) mid-run, one paused
## past its lease; also checks that no object was written by two replicas at once (the
## emulator's write log). Not part of `make test`
chaos-sharded: cluster
	AIGW_CHAOS_SHARDS=3 nice $(CARGO) test --test chaos -- --nocapture

## chaos-sharded-short: the sharded suite at chaos-short's scale (60 resources, 5 kills; the
## addition, removal and pause, deletes during creates, the apiserver restart): about 2 minutes,
## part of `make test`
chaos-sharded-short: cluster
	AIGW_CHAOS_SHARDS=3 AIGW_CHAOS_CONFIGS=40 AIGW_CHAOS_POLICIES=10 AIGW_CHAOS_DEPLOYMENTS=10 \
		AIGW_CHAOS_KILLS=5 nice $(CARGO) test --test chaos -- --nocapture

## docs: the book in docs/ (mdBook) built into docs/book/ (hack/docs.sh installs the pinned mdbook
## once); `make test` builds it too and fails on a broken internal link (tests/it/docs/book.rs)
docs:
	bash hack/docs.sh

## image: target/image/aigw-oci.tar, an OCI image built without a container engine (hack/image.sh)
image:
	bash hack/image.sh

## image-check: the check `make image` makes of `aigw crds` in the image (every CRD of crds/, byte
## for byte), on the debug binary: seconds (`make test` runs the check on the binary its test build made)
image-check:
	$(CARGO) build --bin aigw
	bash hack/image.sh check-crds target/debug/aigw

## demo: control plane + emulator + operator + examples/, then `kubectl get aigw -A`
demo:
	bash hack/demo.sh

## bench: the operator rolling out N Configs (N=1000; N=10000 make bench) against a minimal
## client, on a control plane of its own; writes target/bench/report-N.json (hack/bench.sh)
bench:
	bash hack/bench.sh

## bench-scale: the operator's and the control plane's RSS and CPU per object at 1,000 / 10,000 /
## 100,000 Configs, each on a fresh control plane (hack/bench-scale.sh; about an hour; not in CI)
bench-scale:
	bash hack/bench-scale.sh

## bench-emulator: the emulator's loopback throughput (release build, 10,000 configs, wrk)
bench-emulator:
	bash hack/bench-emulator.sh

clean: cluster-down
	$(CARGO) clean
