# shellcheck shell=sh
# bundle-env.sh — use a bundle made by share/scripts/gpu-bundle.sh on another machine: unpack it,
# find the CUDA libraries it leaves out (the toolkit's, or the nvidia-* wheels PyTorch uses), and
# write one wrapper per program (DIR/wrap/NAME) that sets the library path and Open MPI's prefix
# for that program alone, so the Python of the same machine keeps its own libraries. MPI_Init
# runs as an isolated singleton: no orted daemon (which would want ssh to start).
# Usage: . tests/gpu/bundle-env.sh; bundle_unpack ARCHIVE DIR; bundle_wrap [direct|loader]
# (loader: start the programs with the bundle's own glibc, for a machine whose glibc is older).

# bundle_unpack ARCHIVE DIR: sets PT_BUNDLE to DIR/ptrain-gpu (with Python's tarfile where xz is missing)
bundle_unpack() {
    mkdir -p "$2" || return 1
    if command -v xz >/dev/null; then
        tar -C "$2" -xJf "$1" || return 1
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2" || return 1
    fi
    PT_BUNDLE=$(cd "$2/ptrain-gpu" && pwd)
}

# The directory holding library $1 on this machine: the CUDA toolkit first, then the nvidia-*
# wheels of python3, then the system's directories; never a stub or a cuda-compat copy. The
# driver (libcuda.so.1) only from the system, and nothing (empty) when the loader's cache has it.
# (Names here start with _b: this file is sourced by scripts with variables of their own.)
bundle_find_lib() {
    _broots="${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-13*"
    _broots="$_broots $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null || :)"
    _broots="$_broots /opt/torch/.venv/lib/python3*/site-packages/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64"
    if [ "$1" = libcuda.so.1 ]; then
        ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && return 0
        _broots="/usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64"
    fi
    for _broot in $_broots; do
        [ -d "$_broot" ] || continue
        _bhit=$(find -L "$_broot" -maxdepth 4 -name "$1" \( -type f -o -type l \) 2>/dev/null |
            grep -v '/stubs/\|/compat/' | head -n 1)
        [ -n "$_bhit" ] && dirname "$_bhit" && return 0
    done
    return 1
}

# The library path for the bundle's programs: the bundle, then each CUDA library's directory,
# then whatever LD_LIBRARY_PATH the machine set (the driver's directory, say). Says what it found.
bundle_libpath() {
    _bpath=$PT_BUNDLE/lib
    for _blib in $(sed -n 's/^cuda_libs=//p' "$PT_BUNDLE/MANIFEST") libcuda.so.1; do
        if _bdir=$(bundle_find_lib "$_blib"); then
            echo "bundle: $_blib in ${_bdir:-the ld.so cache}" >&2
            [ -z "$_bdir" ] || case ":$_bpath:" in *":$_bdir:"*) ;; *) _bpath=$_bpath:$_bdir ;; esac
        else
            echo "bundle: $_blib not found on this machine" >&2
        fi
    done
    echo "$_bpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# bundle_wrap [direct|loader]: PT_BUNDLE/wrap/NAME for every program in PT_BUNDLE/bin
bundle_wrap() {
    _blibpath=$(bundle_libpath)
    _brun=""
    [ "${1:-direct}" = loader ] &&
        _brun="\"$PT_BUNDLE/glibc/ld-linux-x86-64.so.2\" --library-path \"$PT_BUNDLE/glibc:\$LD_LIBRARY_PATH\""
    mkdir -p "$PT_BUNDLE/wrap"
    for _bprog in "$PT_BUNDLE"/bin/*; do
        cat >"$PT_BUNDLE/wrap/${_bprog##*/}" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH="$_blibpath"
export OPAL_PREFIX="$PT_BUNDLE/ompi" OMPI_MCA_mca_base_param_files="$PT_BUNDLE/ompi/etc/openmpi-mca-params.conf"
export OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HWLOC_PLUGINS_PATH="$PT_BUNDLE/hwloc-plugins"
exec $_brun "$_bprog" "\$@"
EOF
        chmod +x "$PT_BUNDLE/wrap/${_bprog##*/}"
    done
}
