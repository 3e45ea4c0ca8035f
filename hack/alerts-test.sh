#!/usr/bin/env bash
# Unit tests of the chart's alert rules (`make alerts-test`, part of `make test`):
#   1. renders the chart's PrometheusRule with monitoring.enabled=true and the default values
#      (release aigw in aigw-system, so the rules select job="aigw-metrics",
#      namespace="aigw-system"), and takes its spec: the rule file Prometheus would load;
#   2. `promtool check rules` on it, and on a rendering with other values (thresholds, a
#      selector, extra alert labels);
#   3. `promtool test rules hack/alerts/*_test.yaml` against it: each alert firing and not.
# tests/it/chart/monitoring.rs checks the other side: every metric these rules and the Grafana dashboard
# name is one the operator exports.
#
# promtool is built from its Go module (hack/promtool/go.mod pins
# github.com/prometheus/prometheus; go.sum is committed) into
# ${AIGW_CACHE_DIR:-~/.cache/aigw}/promtool-<version>-<hash>/promtool, the hash covering go.mod,
# go.sum and `go version`: the first build takes minutes, later runs take it from the cache.
#
# Usage: bash hack/alerts-test.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

PROMTOOL_SRC="$HACK_DIR/promtool"
PROMTOOL_PKG=github.com/prometheus/prometheus/cmd/promtool
TESTS_DIR="$HACK_DIR/alerts"

# The pinned module version (v0.316.0 is Prometheus 3.16.0).
promtool_module_version() { awk '$1 == "github.com/prometheus/prometheus" {print $2}' "$PROMTOOL_SRC/go.mod"; }

promtool_hash() {
	{
		cat "$PROMTOOL_SRC/go.mod" "$PROMTOOL_SRC/go.sum"
		go version
	} | sha256sum | cut -c1-12
}

# ensure_promtool: sets PROMTOOL, building it into the cache if missing.
ensure_promtool() {
	need_go
	local module version dir tmp
	module="$(promtool_module_version)"
	[[ -n "$module" ]] || {
		echo "error: $PROMTOOL_SRC/go.mod does not require github.com/prometheus/prometheus" >&2
		return 1
	}
	# v0.3MM.P -> 3.MM.P, as Prometheus numbers its Go module.
	version="${module#v0.}"
	version="${version:0:1}.${version:1}"
	dir="$CACHE_ROOT/promtool-$module-$(promtool_hash)"
	PROMTOOL="$dir/promtool"
	if [[ ! -x "$PROMTOOL" ]]; then
		echo ">>> Building promtool $version ($PROMTOOL_PKG@$module) into $PROMTOOL"
		echo ">>>   the first build takes several minutes on 2 cores; later ones come from this cache"
		local t0=$SECONDS
		mkdir -p "$dir"
		tmp="$PROMTOOL.tmp.$$"
		if ! (cd "$PROMTOOL_SRC" && go_env go build -trimpath \
			-ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" \
			-o "$tmp" "$PROMTOOL_PKG"); then
			rm -f "$tmp"
			return 1
		fi
		mv -f "$tmp" "$PROMTOOL"
		echo ">>> Built promtool in $((SECONDS - t0)) s"
	fi
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# render_rules OUT [helm args...]: the rule groups of the chart's PrometheusRule (its spec,
# unindented) into OUT.
render_rules() {
	local out="$1"
	shift
	bash "$HACK_DIR/chart-check.sh" --template aigw --namespace aigw-system \
		--set monitoring.enabled=true --show-only templates/prometheusrule.yaml "$@" >"$out.rendered"
	awk '/^spec:$/ { spec = 1; next } spec && /^  / { print substr($0, 3); next } spec { spec = 0 }' \
		"$out.rendered" >"$out"
	grep -q '^groups:' "$out" || {
		echo "FAIL: no rule groups in the rendered PrometheusRule ($out.rendered)" >&2
		return 1
	}
}

ensure_promtool
echo "promtool: $PROMTOOL ($("$PROMTOOL" --version 2>&1 | head -n 1))"

render_rules "$work/rules.yaml"
echo "--- promtool check rules (default values)"
"$PROMTOOL" check rules "$work/rules.yaml"

render_rules "$work/other.yaml" \
	--set 'monitoring.rules.selector=service="ops-aigw"' \
	--set monitoring.rules.additionalAlertLabels.team=platform \
	--set monitoring.alerts.stalled.for=1h \
	--set monitoring.alerts.driftCorrections.window=6h \
	--set monitoring.alerts.apiErrors.threshold=0.5 \
	--set monitoring.alerts.driftPassSlow.factor=1.5
echo "--- promtool check rules (other values)"
"$PROMTOOL" check rules "$work/other.yaml"
for expected in 'team: platform' 'service="ops-aigw"' 'for: "1h"' '[6h]' '> 0.5' '(1.5 *'; do
	grep -qF -- "$expected" "$work/other.yaml" || {
		echo "FAIL: '$expected' not in the rules rendered with other values" >&2
		exit 1
	}
done

echo "--- promtool test rules"
shopt -s nullglob
tests=("$TESTS_DIR"/*_test.yaml)
((${#tests[@]})) || {
	echo "FAIL: no tests under $TESTS_DIR" >&2
	exit 1
}
# The tests name the rule file rules.yaml, beside them.
cp "${tests[@]}" "$work/"
(cd "$work" && "$PROMTOOL" test rules ./*_test.yaml)
echo "alerts-test: all rule tests passed"
