#!/usr/bin/env bash
# `make docker-check`: build the Docker image on a machine where no image can be pulled and no
# container can run, and run the recipe inside the build. Uses Debian's podman (`podman build
# --isolation=chroot`) and debootstrap (apt-get install podman debootstrap; run as root):
#   1. a Debian root file system (debootstrap, kept as image localhost/tacotron2-debian:bookworm);
#   2. a local base on it: a venv with this machine's CPU torch (docker/cpu-base.Containerfile);
#   3. the project's Dockerfile with --build-arg BASE_IMAGE=that base;
#   4. docker/check.Containerfile on the result: `train.py --check` and one demo epoch, as build steps.
# Needs Debian's mirror and PyPI. Work files and the log: .cache/docker-check/.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
work=.cache/docker-check
rootfs_image=localhost/tacotron2-debian:bookworm
base_image=localhost/tacotron2-cpu-base
image=localhost/tacotron2-batching:check
build=(podman --storage-driver "${STORAGE_DRIVER:-vfs}" build --isolation=chroot)
mkdir -p "$work"
exec > >(tee "$work/docker-check.log") 2>&1
for tool in podman debootstrap; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found: apt-get install podman debootstrap" >&2; exit 2; }
done
set -x

if ! podman --storage-driver "${STORAGE_DRIVER:-vfs}" image exists "$rootfs_image"; then
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$work/rootfs" \
        http://deb.debian.org/debian
    tar -C "$work/rootfs" -c . | podman --storage-driver "${STORAGE_DRIVER:-vfs}" import - "$rootfs_image"
    rm -rf "$work/rootfs"
fi

# This machine's CPU torch, as a wheel (pip finds it where this machine's pip finds it).
torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)')
rm -rf "$work/base" && mkdir -p "$work/base/ca"
"$PYTHON" -m pip download --quiet --no-deps --dest "$work/base" "torch==$torch_version"
cp /usr/local/share/ca-certificates/*.crt "$work/base/ca/" 2> /dev/null || true
"${build[@]}" -f docker/cpu-base.Containerfile --build-arg ROOTFS="$rootfs_image" -t "$base_image" "$work/base"

"${build[@]}" --build-arg BASE_IMAGE="$base_image" -t "$image" .
rm -rf "$work/empty" && mkdir -p "$work/empty"
"${build[@]}" -f docker/check.Containerfile --build-arg IMAGE="$image" -t "$image-ran" "$work/empty"
set +x
echo "docker-check: the image builds on torch $torch_version and the demo ran inside it (log: $work/docker-check.log)"
