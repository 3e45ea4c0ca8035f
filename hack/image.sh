#!/usr/bin/env bash
# Build target/image/aigw-oci.tar (what `make image` runs): an OCI image archive of the release
# binary, made without a container engine.
#
# The root filesystem holds /aigw, the shared libraries `ldd` lists for it (glibc, libgcc_s,
# the dynamic loader) and an /etc/passwd naming the non-root user 65532; no shell, nothing else.
# umoci (Debian package; installed when missing) packs it as a one-layer image with user
# 65532:65532, entrypoint /aigw and PATH=/ (so the chart's default `command: ["aigw"]` finds
# it). The script then unpacks the image it wrote and runs `aigw --version` and `aigw crds`
# inside it with chroot, as that user. Load the archive with `podman load -i`, `docker load -i`
# (Docker >= 25), or `skopeo copy oci-archive:target/image/aigw-oci.tar docker://REGISTRY/aigw:TAG`.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

uid=65532
out_dir="target/image"
archive="$out_dir/aigw-oci.tar"
work="$out_dir/work"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
tag="${AIGW_IMAGE_TAG:-$version}"

ensure_umoci() {
	command -v umoci >/dev/null 2>&1 && return 0
	echo ">>> installing umoci (apt-get)"
	if ! apt-get install -y umoci >/dev/null 2>&1; then
		apt-get update >/dev/null
		apt-get install -y umoci >/dev/null
	fi
}

# copy_with_parents FILE ROOTFS: FILE (symlinks resolved) at the same path under ROOTFS.
copy_with_parents() {
	mkdir -p "$2$(dirname "$1")"
	cp -L "$1" "$2$1"
}

assemble_rootfs() {
	local rootfs="$1" lib
	mkdir -p "$rootfs/etc" "$rootfs/tmp"
	chmod 1777 "$rootfs/tmp"
	install -m 0755 target/release/aigw "$rootfs/aigw"
	# Every absolute path ldd prints: the libraries (after =>) and the dynamic loader.
	for lib in $(ldd target/release/aigw | grep -o '/[^ ]*'); do
		copy_with_parents "$lib" "$rootfs"
	done
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n' "$uid" "$uid" >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnonroot:x:%d:\n' "$uid" >"$rootfs/etc/group"
	mkdir -p "$rootfs/home/nonroot"
	chown "$uid:$uid" "$rootfs/home/nonroot"
}

pack() {
	local rootfs="$1" layout="$2" created
	created="$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%dT%H:%M:%SZ)"
	umoci init --layout "$layout"
	umoci new --image "$layout:$tag"
	umoci insert --image "$layout:$tag" --history.created "$created" --history.created_by "hack/image.sh" "$rootfs" /
	umoci config --image "$layout:$tag" --created "$created" --os linux --architecture amd64 \
		--config.user "$uid:$uid" --config.entrypoint /aigw --config.env PATH=/ --config.workingdir / \
		--config.label "org.opencontainers.image.title=aigw" \
		--config.label "org.opencontainers.image.version=$version" \
		--config.label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
	umoci gc --layout "$layout"
}

# check LAYOUT: unpack the image and run the binary in it as the image's user.
check() {
	local layout="$1" bundle="$work/check" rootfs crds chroot
	chroot="$(command -v chroot)"
	umoci unpack --image "$layout:$tag" "$bundle" >/dev/null
	rootfs="$bundle/rootfs"
	if [[ -e "$rootfs/bin/sh" || -e "$rootfs/usr/bin/sh" ]]; then
		echo "error: the image has a shell" >&2
		return 1
	fi
	echo ">>> chroot: aigw --version (as $uid, PATH=/)"
	env -i PATH=/ "$chroot" --userspec="$uid:$uid" "$rootfs" aigw --version
	echo ">>> chroot: aigw crds"
	crds="$(env -i PATH=/ "$chroot" --userspec="$uid:$uid" "$rootfs" aigw crds)"
	check_crds "$crds"
}

# check_crds YAML: YAML (what `aigw crds` printed) is exactly the committed crds/ directory: one
# CRD per crds/*.yaml file that holds a CustomResourceDefinition, the same bytes as those files
# and the admission policies joined the way `aigw crds` joins them (a test keeps crds/ equal to the
# Rust types, so the count follows the kinds aigw serves; nothing here names a number).
check_crds() {
	local crds="$1" expected file want got
	want=0
	expected=""
	for file in crds/*.yaml; do
		[[ "$(basename "$file")" == free-form-limits.yaml ]] && continue
		grep -q '^kind: CustomResourceDefinition$' "$file" && want=$((want + 1))
		expected+="$(cat "$file")"$'\n---\n'
	done
	expected+="$(cat crds/free-form-limits.yaml)"
	got="$(grep -c '^kind: CustomResourceDefinition$' <<<"$crds" || true)"
	if [[ "$got" != "$want" ]]; then
		echo "error: aigw crds printed $got CRDs; crds/ holds $want" >&2
		return 1
	fi
	if [[ "$crds" != "$expected" ]]; then
		echo "error: aigw crds does not print what crds/ holds (run \`make crds\`?)" >&2
		diff <(printf '%s\n' "$expected") <(printf '%s\n' "$crds") | head -20 >&2
		return 1
	fi
	echo ">>> aigw crds: the $got CRDs of crds/ and the admission policies"
	grep '^  name: .*\.aigw\.io$' <<<"$crds"
}

main() {
	ensure_umoci
	echo ">>> cargo build --release --locked --bin aigw"
	nice -n 10 cargo build --release --locked --bin aigw
	rm -rf "$work" "$archive"
	mkdir -p "$work"
	assemble_rootfs "$work/rootfs"
	pack "$work/rootfs" "$work/oci"
	tar -C "$work/oci" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$archive" .
	check "$work/oci"
	local manifest config
	manifest="$(jq -r '.manifests[0].digest' "$work/oci/index.json")"
	config="$(jq -r '.config.digest' "$work/oci/blobs/sha256/${manifest#sha256:}")"
	echo ">>> image config: $(jq -c '.config | {User, Entrypoint, Env}' "$work/oci/blobs/sha256/${config#sha256:}")"
	echo ">>> wrote $archive ($(du -h "$archive" | cut -f1), tag $tag, manifest $manifest)"
}

# `hack/image.sh check-crds BINARY` (part of `make test`): only the CRD check above, on BINARY run
# on the host; fast, and it fails on what would fail the image's check.
if [[ "${1:-}" == check-crds ]]; then
	check_crds "$("${2:?usage: hack/image.sh check-crds BINARY}" crds)"
	exit
fi

main "$@"
