#!/usr/bin/env bash
# docker/build.sh [IMAGE] -- build docker/Dockerfile into IMAGE (default fakegate:latest).
# `docker build` when a Docker engine answers; otherwise buildah (chroot isolation, host network,
# local base images made with mmdebstrap, layer cache in build/container). See docker/lib.sh.
# Environment: ENGINE=docker|podman to force a path, TESTS=unit|all|none (build-stage tests),
# DEBIAN=bookworm|trixie (the image's Debian release, default bookworm; docker/Dockerfile),
# CONTAINER_STATE=DIR (podman path's state folder).
set -euo pipefail
IMAGE=${1:-${IMAGE:-fakegate:latest}}
. "$(dirname "$0")/lib.sh"
cd "$REPO"

prepare_engine
build_args=()
[ -n "${TESTS:-}" ] && build_args+=(--build-arg "TESTS=$TESTS")
[ -n "${DEBIAN:-}" ] && build_args+=(--build-arg "DEBIAN=$DEBIAN")

t0=$(now)
if [ "$ENGINE" = docker ]; then
  docker build "${build_args[@]}" -f docker/Dockerfile -t "$IMAGE" .
  size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
else
  ensure_base_images
  tb=$(now)
  buildah bud --layers --force-rm --isolation chroot --network host --pull-never --format docker \
    "${build_args[@]}" -f docker/Dockerfile -t "$IMAGE" .
  log "buildah bud took $(elapsed "$tb" "$(now)") s"
  size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
fi
log "built $IMAGE with $ENGINE in $(elapsed "$t0" "$(now)") s; image size $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }') ($size bytes)"
