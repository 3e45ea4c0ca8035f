#!/usr/bin/env bash
# `make docs`: build the book in docs/ (mdBook) into docs/book/ (git ignores it), installing the
# pinned mdbook ($MDBOOK_VERSION in hack/lib.sh) into the cache first when it is missing.
# tests/it/docs/book.rs (part of `make test`) builds it the same way and checks its links.
#
# Usage: bash hack/docs.sh [--dest-dir DIR]    build into DIR instead of docs/book/
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dest="$REPO_ROOT/docs/book"
case "${1:-}" in
--dest-dir)
	dest="$(realpath -m "${2:?--dest-dir needs a directory}")"
	;;
"") ;;
*)
	echo "usage: bash hack/docs.sh [--dest-dir DIR]" >&2
	exit 2
	;;
esac

ensure_mdbook
"$MDBOOK" build "$REPO_ROOT/docs" --dest-dir "$dest"
echo "book: $dest/index.html"
