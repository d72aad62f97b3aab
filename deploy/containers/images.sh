#!/usr/bin/env bash
# Builds every image docker-compose.yml needs with podman, where no image registry is reachable:
#   - base images made here, tagged with the names the Dockerfile uses: debian:bookworm-slim (debootstrap) and
#     swift:6.3-bookworm (that Debian with the host's Swift toolchain);
#   - stand-ins for the third-party images compose.standins.yml swaps in: PostgreSQL 15, nginx and the Tansu
#     broker (for Apache Kafka), from Debian's packages (standins/);
#   - the project's images, from the project's Dockerfile exactly as users build them: delivery-platform:local
#     (target runtime) and delivery-platform-tools:local (target tools).
# An image made here is rebuilt only when its recipe changes (a hash kept in its label); the project's images are
# rebuilt every time, incrementally (the Dockerfile's build cache).
#   deploy/containers/images.sh
set -euo pipefail
source "$(dirname "$0")/../local/common.sh"
here="$ROOT/deploy/containers"
export CONTAINERS_CONF="$here/containers.conf"
work=$(runtime_dir containers)/images
mkdir -p "$work"

command -v podman >/dev/null || die "podman is not installed (apt-get install podman runc netavark aardvark-dns iptables podman-compose debootstrap)"
"$ROOT/deploy/local/setup.sh"

# Podman's default network on a host where podman ran before with CNI (its fallback when netavark is missing, and
# the backend any plain `podman` call on such a host still uses) leaves a bridge, cni-podman0, that claims the same
# subnet as netavark's podman0; the kernel then routes the replies to the containers to the dead bridge, and nothing
# in a container (apt-get in a build step, a service) reaches the network. A CNI bridge that is down has no
# container on it, and it is removed.
if ip -o link show cni-podman0 2>/dev/null | grep -q "state DOWN"; then
    log "removing the unused CNI bridge cni-podman0, which hides netavark's podman0 subnet"
    as_root ip link delete cni-podman0
fi

recipe_of() { cat "$@" | sha256sum | cut -c1-16; }
recipe_label() { podman image inspect --format '{{index .Labels "delivery-platform.recipe"}}' "$1" 2>/dev/null || true; }

# standin IMAGE RECIPE CONTEXT CONTAINERFILE [podman build options...]: builds IMAGE unless it has RECIPE already.
standin() {
    local image=$1 recipe=$2 context=$3 containerfile=$4
    shift 4
    if [ "$(recipe_label "$image")" = "$recipe" ]; then
        log "$image is up to date"
        return
    fi
    log "building $image"
    podman build --pull=never --label "delivery-platform.recipe=$recipe" -t "$image" -f "$containerfile" "$@" \
        "$context"
}

# Debian 12, minimal: debootstrap from Debian's mirror, imported as debian:bookworm-slim.
debian_recipe=$(echo "debootstrap minbase bookworm v1" | sha256sum | cut -c1-16)
if [ "$(recipe_label debian:bookworm-slim)" != "$debian_recipe" ]; then
    log "making debian:bookworm-slim with debootstrap"
    rootfs="$work/rootfs"
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
        { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" -c . | podman import --change "CMD [\"bash\"]" \
        --change "LABEL delivery-platform.recipe=$debian_recipe" - debian:bookworm-slim >/dev/null
    rm -rf "$rootfs"
fi

# A build step that cannot reach Debian's mirror fails with apt's "Unable to locate package": say why first.
podman run --rm --pull=never debian:bookworm-slim getent hosts deb.debian.org >/dev/null 2>&1 ||
    log "warning: a container here cannot resolve deb.debian.org; build steps that install packages will fail" \
        "(check podman's network: ip route should show 10.88.0.0/16 on podman0 only)"

swift_recipe=$(cat "$here/standins/swift.Containerfile" <(swift --version 2>&1) <(echo "$debian_recipe") |
    sha256sum | cut -c1-16)
swift_root=$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")
standin swift:6.3-bookworm "$swift_recipe" "$here/standins" "$here/standins/swift.Containerfile" \
    --volume "$swift_root:/host-swift:ro"

standin delivery-standin-postgres:15 \
    "$(recipe_of "$here"/standins/postgres.* "$here/standins/postgres-entrypoint.sh" <(echo "$debian_recipe"))" \
    "$here/standins" "$here/standins/postgres.Containerfile"
standin delivery-standin-nginx:1.22 \
    "$(recipe_of "$here"/standins/nginx.* "$here/standins/nginx-entrypoint.sh" <(echo "$debian_recipe"))" \
    "$here/standins" "$here/standins/nginx.Containerfile"
tansu_context="$work/tansu"
mkdir -p "$tansu_context"
cp -L "$LOCAL/bin/tansu" "$tansu_context/tansu"
cp "$here/standins/kafka-broker-api-versions.sh" "$tansu_context/"
standin delivery-standin-tansu:0.6 \
    "$(recipe_of "$here/standins/tansu.Containerfile" "$tansu_context"/* <(echo "$debian_recipe"))" \
    "$tansu_context" "$here/standins/tansu.Containerfile"

# The project's images. Swift packages come from the host's mirror where git is told so (url.insteadOf in
# /etc/gitconfig): the build steps get the mirror and those settings mounted, and the Dockerfile stays as it is.
mirror_options=()
mirror=$(git config --system --get-regexp '^url\..*\.insteadof$' 2>/dev/null | head -1 | sed -E 's/^url\.(.*)\.insteadof .*/\1/' || true)
if [ -n "$mirror" ] && [ -d "$mirror" ]; then
    git config --system --get-regexp '^url\.' | awk '{ print "[url \"" substr($1, 5, length($1) - 14) "\"]\n\tinsteadOf = " $2 }' \
        >"$work/gitconfig"
    mirror_options=(--volume "$mirror:$mirror:ro" --volume "$work/gitconfig:/etc/gitconfig:ro")
    log "Swift packages from the mirror in $mirror"
fi
# Where the host trusts a TLS-intercepting proxy, PyPI (the librdkafka stage) is reached through it: pip in the
# build steps gets the host's CA bundle.
host_ca=/etc/ssl/certs/ca-certificates.crt
if [ -s "$host_ca" ]; then
    printf '[global]\ncert = /etc/host-ca-certificates.crt\n' >"$work/pip.conf"
    mirror_options+=(--volume "$host_ca:/etc/host-ca-certificates.crt:ro" --volume "$work/pip.conf:/etc/pip.conf:ro")
fi
# The build stage is tagged too (delivery-platform-build:local, from the same cached steps): its layers, the Debian
# packages' among them, are then a tagged image's and stay the build cache. The images these builds replace are
# removed with their untagged parents, so that a rebuild after every source change does not fill the disk.
replaced=()
for target in build runtime tools; do
    image=delivery-platform-$target:local
    [ "$target" = runtime ] && image=delivery-platform:local
    replaced+=("$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)")
    log "building $image (Dockerfile, target $target)"
    podman build --pull=never --target "$target" -t "$image" "${mirror_options[@]}" -f "$ROOT/Dockerfile" "$ROOT"
done
for id in "${replaced[@]}"; do
    [ -n "$id" ] || continue
    [ -z "$(podman image inspect --format '{{join .RepoTags " "}}' "$id" 2>/dev/null)" ] || continue
    podman rmi "$id" >/dev/null 2>&1 || log "the replaced image ${id:0:12} is still in use and was kept"
done
podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'delivery-platform|delivery-standin' | sort
