#!/usr/bin/env bash
# An offline kind node image (localhost/tinystream/kind-node:<k8s version>)
# for the e2e/kind suite, built with podman from Debian's packages and the
# binaries of tools/k8s/build-binaries.sh: no container registry is needed.
#
#   tools/k8s/build-node-image.sh              # idempotent; a warm run takes seconds
#   tools/k8s/build-node-image.sh --if-needed  # nothing to do where Docker can pull kind's stock node image
#
# Why not `kind build node-image`: it runs `ctr content fetch` unconditionally
# for etcd, CoreDNS, pause, kindnetd and the storage images, calls the docker
# CLI, and its base image starts from debian:trixie-slim plus git clones, none
# of which this workplace can reach (../shared/KUBERNETES-NOTES.md). This
# script does what kind's two builds do, minus the pulls:
#   1. base: debootstrap bookworm, the packages of kind's base Dockerfile,
#      Debian's containerd/runc/CNI plugins (containerd told
#      restrict_oom_score_adj = true: root here lacks CAP_SYS_RESOURCE), kind's
#      own images/base/files (from kind's Go module) and its systemd steps;
#   2. images: kube-apiserver, -controller-manager, -scheduler, -proxy, etcd,
#      CoreDNS, pause (3.10.1 and 3.10, built from pause.c), and the
#      local-path provisioner + helper, each a `podman save` archive tagged as
#      kubeadm and kind's storage manifest ask for;
#   3. node: the base with the binaries in /usr/bin, /kind/version, kind's
#      storage manifest, the images imported into the node's containerd with
#      `ctr -n k8s.io images import --no-unpack`, committed.
# There is no kindnetd (the Go module proxy does not serve it): create the
# cluster with networking.disableDefaultCNI and give each node a bridge CNI
# config on its pod range plus routes to the other nodes (e2e/kind does).
#
# Each stage is stamped by its inputs (versions, this script), so an unchanged
# stage is skipped. Needs root, podman, debootstrap, gcc, go.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.34.4}"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
BIN="${K8S_BIN:-$ROOT/.cache/k8s/bin}"
CACHE="$ROOT/.cache/k8s/node"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
NODE_IMAGE="${NODE_IMAGE:-localhost/tinystream/kind-node:$K8S_VERSION}"
BASE_IMAGE="localhost/tinystream/kind-base:bookworm"
PAUSE_VERSIONS=(3.10.1 3.10)
SELF_HASH=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
T0=$SECONDS

log() { echo "node image: $* ($(( SECONDS - T0 )) s)"; }
die() { echo "node image: $*" >&2; exit 1; }

if [[ "${1:-}" == "--if-needed" && "${TINYSTREAM_KIND_PROVIDER:-auto}" != "offline" ]]; then
  # The pin of e2e/kind/kind_helpers.py: kind v0.33.0's own default node image.
  stock="kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"
  if docker info >/dev/null 2>&1 && { docker image inspect "$stock" >/dev/null 2>&1 \
       || timeout 600 docker pull "$stock" >/dev/null 2>&1; }; then
    log "Docker has kind's stock node image: the offline one is not needed"
    exit 0
  fi
  [[ $(id -u) -eq 0 ]] || { log "not root: cannot build the offline node image (e2e/kind will say so)"; exit 0; }
fi

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, privileged podman)"
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v gcc >/dev/null; then
  log "apt-get install podman debootstrap gcc"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq podman debootstrap gcc libc6-dev \
    >/dev/null || die "apt-get install -y podman debootstrap gcc libc6-dev failed"
fi
for tool in podman debootstrap gcc go; do
  command -v "$tool" >/dev/null || die "$tool is missing (apt-get install -y podman debootstrap gcc; Go from go.dev)"
done
command -v runc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq runc \
  >/dev/null || die "apt-get install -y runc failed"
if ! grep -q '^runtime *= *"runc"' /etc/containers/containers.conf 2>/dev/null; then
  # Debian's podman defaults to crun, which refuses this host's hybrid cgroups
  # ("cgroups in hybrid mode not supported"); runc runs there.
  mkdir -p /etc/containers && printf '\n[engine]\nruntime = "runc"\n' >>/etc/containers/containers.conf
  log "set runtime = runc in /etc/containers/containers.conf"
fi
# kind's podman provider mounts /lib/modules read-only into every node; a VM without modules lacks it.
mkdir -p /lib/modules
if ! grep -q '^default_ulimits' /etc/containers/containers.conf 2>/dev/null; then
  # kind's nodes run systemd + containerd + kubelet: podman's default nofile limit is too low for them.
  mkdir -p /etc/containers
  grep -q '^\[containers\]' /etc/containers/containers.conf 2>/dev/null || echo '[containers]' >>/etc/containers/containers.conf
  sed -i '/^\[containers\]/a default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]' /etc/containers/containers.conf
  log "set default_ulimits in /etc/containers/containers.conf"
fi
mkdir -p "$CACHE/images"

image_label() { podman image inspect --format "{{ index .Labels \"$2\" }}" "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- 1. base
# The packages of kind's base Dockerfile that bookworm has, plus containerd,
# runc and the CNI plugins (kind builds those from git; Debian packages them).
PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2
PACKAGES+=,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc
PACKAGES+=,containernetworking-plugins,busybox-static,socat,ebtables
BASE_REVISION=1  # raise when stage 1 below changes (editing the rest of this script must not re-debootstrap)
BASE_STAMP="$KIND_VERSION-$(echo "$PACKAGES" | sha256sum | cut -c1-12)-r$BASE_REVISION"
KIND_SRC=$(cd /tmp && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[[ -d "$KIND_SRC/images/base/files" ]] || die "kind $KIND_VERSION's module has no images/base/files"

# Stage 2 copies binaries out of the rootfs: rebuild the base when its image or its rootfs is missing
# (another checkout's podman storage can hold the image without this .cache).
if [[ "$(image_label "$BASE_IMAGE" io.tinystream.stamp)" != "$BASE_STAMP" \
      || ! -f "$CACHE/base-rootfs/.debootstrap-$BASE_STAMP" ]]; then
  rootfs="$CACHE/base-rootfs"
  if [[ ! -f "$rootfs/.debootstrap-$BASE_STAMP" ]]; then
    rm -rf "$rootfs" && mkdir -p "$rootfs"
    log "debootstrap bookworm + containerd/runc/CNI/systemd into $rootfs (about 2-3 min)"
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log $CACHE/debootstrap.log)"; }
    touch "$rootfs/.debootstrap-$BASE_STAMP"
  fi
  log "kind $KIND_VERSION's base files and systemd steps"
  files="$KIND_SRC/images/base/files"
  install -d -m 0755 "$rootfs/kind" "$rootfs/kind/bin" "$rootfs/LICENSES" "$rootfs/etc/kubernetes/manifests" \
    "$rootfs/etc/systemd/system/kubelet.service.d" "$rootfs/opt/cni"
  install -m 0755 "$files"/usr/local/bin/* "$rootfs/usr/local/bin/"
  install -m 0755 "$files"/kind/bin/* "$rootfs/kind/bin/"
  install -m 0644 "$files"/kind/README.txt "$rootfs/kind/"
  install -m 0644 "$files"/etc/crictl.yaml "$rootfs/etc/"
  install -m 0644 "$files"/etc/containerd/* "$rootfs/etc/containerd/"
  install -m 0644 "$files"/etc/default/* "$rootfs/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$rootfs/etc/sysctl.d/"
  install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$rootfs/etc/systemd/system/"
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
  # Debian's containerd lives in /usr/bin, kind's unit starts /usr/local/bin/containerd.
  sed -i 's#/usr/local/bin/containerd#/usr/bin/containerd#' "$rootfs/etc/systemd/system/containerd.service"
  # Root here lacks CAP_SYS_RESOURCE: runc cannot raise a container's oom_score_adj.
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$rootfs/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$rootfs/etc/containerd/config.toml" || die "containerd config changed shape"
  # Debian puts the CNI plugins in /usr/lib/cni; containerd looks in /opt/cni/bin.
  rm -rf "$rootfs/opt/cni/bin" && ln -s /usr/lib/cni "$rootfs/opt/cni/bin"
  # (the rootfs's own ctr and jq: the host needs neither)
  chroot "$rootfs" /bin/sh -c 'ctr oci spec \
    | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" \
    | jq "del(.process.rlimits)"' >"$rootfs/etc/containerd/cri-base.json"
  # The base Dockerfile's systemd steps.
  rm -f "$rootfs"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service \
        "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/* \
        "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* \
        "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl* "$rootfs"/lib/systemd/system/basic.target.wants/*
  grep -q '^ReadKMsg=no' "$rootfs/etc/systemd/journald.conf" || echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$rootfs/sbin/init"
  chroot "$rootfs" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$rootfs" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  log "podman import $BASE_IMAGE"
  tar -C "$rootfs" --exclude=./.debootstrap-* -c . | podman import -q \
    --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change "LABEL io.tinystream.stamp=$BASE_STAMP" - "$BASE_IMAGE" >/dev/null
else
  log "base $BASE_IMAGE (cached)"
fi

# -------------------------------------------------------------- 2. images
for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns \
         local-path-provisioner; do
  [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing: run tools/k8s/build-binaries.sh first"
done
# Each image is a directory made into an image by `podman build` (FROM
# scratch, no registry) and saved as a docker archive, which ctr imports.
ROOTFS="$CACHE/base-rootfs"
work="$CACHE/work" && rm -rf "$work" && mkdir -p "$work"

# copy_with_libs DEST FILE...: each file from the base rootfs with the shared libraries it needs.
copy_with_libs() {
  local dest=$1; shift
  local f lib
  for f in "$@"; do
    mkdir -p "$dest$(dirname "$f")" && cp -a "$ROOTFS$f" "$dest$f"
    [[ -L "$ROOTFS$f" ]] && copy_with_libs "$dest" "$(chroot "$ROOTFS" readlink -f "$f")"
    for lib in $(chroot "$ROOTFS" ldd "$(chroot "$ROOTFS" readlink -f "$f")" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
      [[ -e "$dest$lib" ]] || { mkdir -p "$dest$(dirname "$lib")" && cp -aL "$ROOTFS$lib" "$dest$lib"; }
    done
  done
}

# build_image NAME:TAG DIR ENTRYPOINT-JSON: a FROM-scratch image of DIR, saved to $CACHE/images.
build_image() {
  local ref=$1 dir=$2 entrypoint=$3 out
  out="$CACHE/images/$(echo "$ref" | tr '/:' '__').tar"
  printf 'FROM scratch\nCOPY . /\nENTRYPOINT %s\n' "$entrypoint" >"$dir/Containerfile"
  podman build -q -f "$dir/Containerfile" -t "$ref" "$dir" >/dev/null
  rm -f "$out" && podman save -q --format docker-archive -o "$out" "$ref" >/dev/null
  echo "$out"
}

IMAGES_STAMP="$K8S_VERSION-$BASE_STAMP-$(cat "$BIN"/.*.version 2>/dev/null | sha256sum | cut -c1-12)-$SELF_HASH"
if [[ "$(cat "$CACHE/images/.stamp" 2>/dev/null)" != "$IMAGES_STAMP" ]]; then
  [[ -d "$ROOTFS/usr" ]] || die "$ROOTFS is gone; delete $CACHE and run again"
  rm -f "$CACHE"/images/*.tar
  mapfile -t wanted < <("$BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
  for ref in "${wanted[@]}"; do
    name=$(basename "${ref%%:*}")
    dir="$work/$name" && mkdir -p "$dir/usr/local/bin" "$dir/tmp" "$dir/etc"
    case "$name" in
      kube-apiserver|kube-controller-manager|kube-scheduler|etcd)
        cp "$BIN/$name" "$dir/usr/local/bin/"
        build_image "$ref" "$dir" "[\"/usr/local/bin/$name\"]" >/dev/null ;;
      kube-proxy)  # programs iptables: Debian's, legacy and nft, the backend picked on first use (below)
        cp "$BIN/kube-proxy" "$dir/usr/local/bin/"
        copy_with_libs "$dir" /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/conntrack
        mkdir -p "$dir/usr/lib/x86_64-linux-gnu" "$dir/bin"
        cp -a "$ROOTFS/usr/lib/x86_64-linux-gnu/xtables" "$dir/usr/lib/x86_64-linux-gnu/"
        copy_with_libs "$dir" $(cd "$ROOTFS" && ls usr/lib/x86_64-linux-gnu/xtables/*.so | sed 's#^#/#')
        cp "$ROOTFS/bin/busybox" "$dir/bin/busybox"
        for t in sh grep ln; do ln -sf busybox "$dir/bin/$t"; done
        # kind's entrypoint puts the node on the host's backend (legacy here); kube-proxy must
        # use the same one. As kubernetes-sigs/iptables-wrappers does: count each backend's rules
        # on first use, point the iptables names at the busier one, run the call again.
        cat >"$dir/usr/sbin/iptables-wrapper" <<'WRAPPER'
#!/bin/sh
legacy=$( (xtables-legacy-multi iptables-save; xtables-legacy-multi ip6tables-save) 2>/dev/null | grep -c '^-')
nft=$( (xtables-nft-multi iptables-save; xtables-nft-multi ip6tables-save) 2>/dev/null | grep -c '^-')
mode=nft
[ "$legacy" -gt "$nft" ] && mode=legacy
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "xtables-$mode-multi" "/usr/sbin/$t"
done
exec "$0" "$@"
WRAPPER
        chmod 0755 "$dir/usr/sbin/iptables-wrapper"
        for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
          ln -sf iptables-wrapper "$dir/usr/sbin/$t"
        done
        build_image "$ref" "$dir" '["/usr/local/bin/kube-proxy"]' >/dev/null ;;
      coredns)
        cp "$BIN/coredns" "$dir/coredns"
        build_image "$ref" "$dir" '["/coredns"]' >/dev/null ;;
      pause)
        pause_c=$(find "$(cd /tmp && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
                  | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/build/pause/linux" -name pause.c)
        gcc -Os -static -o "$dir/pause" "$pause_c" -DVERSION="\"${ref##*:}\""
        for v in "${PAUSE_VERSIONS[@]}"; do
          build_image "registry.k8s.io/pause:$v" "$dir" '["/pause"]' >/dev/null
        done ;;
      *) die "kubeadm asks for $ref, which this script cannot build" ;;
    esac
    log "image $ref"
  done
  # kind's storage manifest names its own provisioner and helper images: built under those names.
  storage_go="$KIND_SRC/pkg/build/nodeimage/const_storage.go"
  provisioner=$(sed -n 's/^const storageProvisionerImage = "\(.*\)"/\1/p' "$storage_go")
  helper=$(sed -n 's/^const storageHelperImage = "\(.*\)"/\1/p' "$storage_go")
  dir="$work/local-path" && mkdir -p "$dir/usr/local/bin" "$dir/tmp"
  cp "$BIN/local-path-provisioner" "$dir/usr/local/bin/"
  build_image "$provisioner" "$dir" '["/usr/local/bin/local-path-provisioner"]' >/dev/null
  dir="$work/helper" && mkdir -p "$dir/bin" "$dir/tmp"
  cp "$ROOTFS/bin/busybox" "$dir/bin/busybox"
  for t in sh mkdir rm ls cat chmod; do ln -sf busybox "$dir/bin/$t"; done
  build_image "$helper" "$dir" '["/bin/sh"]' >/dev/null
  log "images $provisioner, $helper"
  # The manifest itself: the Go string constant of kind's source, its image names spliced in.
  awk '/^const defaultStorageManifest = `/{on=1; next} on && /^`$/{exit} on' "$storage_go" \
    | sed -e "s#\` + storageProvisionerImage + \`#$provisioner#g" -e "s#\` + storageHelperImage + \`#$helper#g" \
    >"$CACHE/images/default-storage.yaml"
  grep -q "image: $provisioner" "$CACHE/images/default-storage.yaml" || die "could not read kind's storage manifest"
  echo "$IMAGES_STAMP" >"$CACHE/images/.stamp"
else
  log "images (cached)"
fi

# ---------------------------------------------------------------- 3. node
NODE_STAMP="$IMAGES_STAMP-$SELF_HASH"
if [[ "$(image_label "$NODE_IMAGE" io.tinystream.stamp)" == "$NODE_STAMP" ]]; then
  log "$NODE_IMAGE (cached)"
  exit 0
fi
builder=tinystream-kind-node-build
podman rm -f "$builder" >/dev/null 2>&1 || true
trap 'podman rm -f "$builder" >/dev/null 2>&1 || true' EXIT
podman run -d --name "$builder" --privileged --entrypoint sleep "$BASE_IMAGE" infinity >/dev/null
for b in kubeadm kubelet kubectl; do
  podman cp "$BIN/$b" "$builder:/usr/bin/$b"
done
podman exec "$builder" sh -c "chmod 0755 /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl \
  && mkdir -p /kind/manifests /kind/images && echo $K8S_VERSION >/kind/version"
podman cp "$CACHE/images/default-storage.yaml" "$builder:/kind/manifests/default-storage.yaml"
for tar in "$CACHE"/images/*.tar; do podman cp "$tar" "$builder:/kind/images/"; done
log "importing $(ls "$CACHE"/images/*.tar | wc -l) images into the node's containerd"
podman exec "$builder" sh -c '
  set -e
  containerd >/var/log/containerd-build.log 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  for tar in /kind/images/*.tar; do ctr -n k8s.io images import --no-unpack --all-platforms "$tar" >/dev/null; done
  ctr -n k8s.io images ls -q | grep -v "^sha256:" | sed "s/^/  /"
  kill "$pid"; wait "$pid" || true
  rm -rf /kind/images /var/log/containerd-build.log'
podman commit -q \
  --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
  --change "LABEL io.tinystream.stamp=$NODE_STAMP" "$builder" "$NODE_IMAGE" >/dev/null
log "$NODE_IMAGE built ($(podman image inspect --format '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
