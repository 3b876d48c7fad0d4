#!/usr/bin/env bash
# Fails when generated files under the given paths differ from what is committed:
# run after `make generate manifests` to prove the committed tree is current.
set -euo pipefail
paths=("$@")
if ! git diff --quiet -- "${paths[@]}" || [[ -n "$(git ls-files --others --exclude-standard -- "${paths[@]}")" ]]; then
  echo "generated files are out of date; run 'make generate manifests' and commit:" >&2
  git status --short -- "${paths[@]}" >&2
  git diff --stat -- "${paths[@]}" >&2
  exit 1
fi
echo "generated code and manifests are current"
