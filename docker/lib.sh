# docker/lib.sh -- sourced by docker/build.sh and docker/smoke-test.sh (bash, set -euo pipefail).
#
# Picks the container engine:
#   docker   when a Docker engine answers (`docker version` reaches a server), or
#   podman   otherwise: buildah builds, podman runs, both on a private state folder
#            ($CONTAINER_STATE, default build/container) -- no daemon, no registry needed.
# On the podman path the Debian base images (debian:bookworm, debian:bookworm-slim) are made
# locally with mmdebstrap from this machine's own apt sources, and the tools are installed with
# apt-get when missing. Needs root there (mmdebstrap --mode=root, buildah chroot isolation).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${IMAGE:-fakegate:latest}
CONTAINER_STATE=${CONTAINER_STATE:-$REPO/build/container}
TOOLS_PKGS="mmdebstrap buildah podman runc uidmap curl"

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ENGINE=docker|podman may be forced from the environment.
pick_engine() {
  if [ -n "${ENGINE:-}" ]; then
    case "$ENGINE" in docker|podman) ;; *) die "ENGINE must be docker or podman (got '$ENGINE')";; esac
  elif command -v docker >/dev/null 2>&1 && timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    ENGINE=docker
  else
    ENGINE=podman
  fi
  export ENGINE
}

# The podman path's tools, from Debian packages.
ensure_tools() {
  local missing="" p
  for p in $TOOLS_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  log "installing$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# A containers.conf and a storage.conf of our own: runc (crun cannot set RLIMIT_NOFILE in this
# kind of sandbox), cgroupfs (no systemd), file events; images and containers under the state
# folder so warm builds reuse the layer cache and nothing touches /var/lib/containers.
setup_state() {
  mkdir -p "$CONTAINER_STATE"/{storage,run,tmp}
  cat >"$CONTAINER_STATE/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$CONTAINER_STATE/events.log"
tmp_dir = "$CONTAINER_STATE/tmp"
EOF
  cat >"$CONTAINER_STATE/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$CONTAINER_STATE/storage"
runroot = "$CONTAINER_STATE/run"
EOF
  export CONTAINERS_CONF="$CONTAINER_STATE/containers.conf"
  export CONTAINERS_STORAGE_CONF="$CONTAINER_STATE/storage.conf"
}

# "URI SUITE" for every enabled deb source in this machine's apt configuration
# (deb822 *.sources, then one-line *.list).
apt_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush(  n, m, i, j, u, s) {
        if (types ~ /(^| )deb( |$)/ && enabled != "no") {
          n = split(uris, u, " "); m = split(suites, s, " ")
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
        }
        types = uris = suites = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); $1 = "" }
      key == "types:"   { types = $0 }
      key == "uris:"    { uris = $0 }
      key == "suites:"  { suites = $0 }
      key == "enabled:" { enabled = tolower($2) }
      END { flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ } print $i, $(i + 1) }' "$f"
  done
}

# debian:$DEBIAN and debian:$DEBIAN-slim (DEBIAN: the release, bookworm by default, or trixie)
# in local storage, made with mmdebstrap (~35 s, once per release).
ensure_base_images() {
  local rel=${DEBIAN:-bookworm}
  if podman image exists "docker.io/library/debian:$rel" &&
     podman image exists "docker.io/library/debian:$rel-slim"; then
    return 0
  fi
  local srcs mirror security
  srcs=$(apt_sources)
  mirror=$(awk '$2 !~ /-security$|\/updates$/ { print $1; exit }' <<<"$srcs")
  security=$(awk '$2 ~ /-security$|\/updates$/ { print $1; exit }' <<<"$srcs")
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (URIs: lines)"
  local lists=("deb $mirror $rel main" "deb $mirror $rel-updates main")
  [ -n "$security" ] && lists+=("deb $security $rel-security main")
  local include=()
  case "$mirror $security" in *https:*) include=(--include=ca-certificates);; esac
  log "base images: mmdebstrap $rel from $mirror${security:+ and $security}"

  local t0 rootfs="$CONTAINER_STATE/rootfs"
  t0=$(now)
  rm -rf "$rootfs"
  mmdebstrap --quiet --variant=minbase --mode=root "${include[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    "$rel" "$rootfs" "${lists[@]}"
  tar --numeric-owner -C "$rootfs" -c . |
    podman import --quiet --change 'CMD ["bash"]' - "docker.io/library/debian:$rel" >/dev/null
  # -slim: the same without docs, man pages and locales, and dpkg told not to bring them back
  # (what the official debian:*-slim images do).
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
         "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/groff/* "$rootfs"/usr/share/linda/* \
         "$rootfs"/usr/share/lintian/*
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  tar --numeric-owner -C "$rootfs" -c . |
    podman import --quiet --change 'CMD ["bash"]' - "docker.io/library/debian:$rel-slim" >/dev/null
  rm -rf "$rootfs"
  log "base images made in $(elapsed "$t0" "$(now)") s"
}

# Everything the chosen engine needs before a build or a run.
prepare_engine() {
  pick_engine
  if [ "$ENGINE" = podman ]; then
    [ "$(id -u)" -eq 0 ] ||
      die "no Docker engine answers, and the buildah/podman path needs root (mmdebstrap, chroot builds); run it as root (sudo)"
    ensure_tools
    setup_state
  fi
}
