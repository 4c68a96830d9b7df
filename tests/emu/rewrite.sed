# rewrite.sed — turns a cuda/*.cu file into C++ the CPU SIMT emulator (tests/emu) compiles with the
# host compiler; nothing else in the source changes:
#   kernel<<<g, b, smem, stream>>>(args)  ->  emu_launch(kernel, g, b, smem, stream)(args)
#   __shared__ T a[N]...;                 ->  static T a[N]...; emu_shared_init(a, sizeof a);
#                                            (one array for the block running: NaN-poisoned per block)
#   extern __shared__ T a[];              ->  T *a = (T *)emu_dyn_shared();  (the launch's dynamic bytes)
#   matmul.cu's 16M-element weight tile  ->  64K elements, so that the tests' weights span several tiles
# A launch split over lines, or any other form, is left as it is and fails the build (the Makefile
# rule greps for <<<, and the fake cuda_runtime.h makes a bare __shared__ a compile error).
s/\([A-Za-z_][A-Za-z0-9_]*\)<<<\(.*\)>>>(/emu_launch(\1, \2)(/g
s/^\([[:space:]]*\)extern __shared__ \([A-Za-z_][A-Za-z0-9_]*\) \([A-Za-z_][A-Za-z0-9_]*\)\[\];/\1\2 *\3 = (\2 *)emu_dyn_shared();/
s/^\([[:space:]]*\)__shared__ \([A-Za-z_][A-Za-z0-9_]*\) \([A-Za-z_][A-Za-z0-9_]*\)\(\[[^;]*\]\);/\1static \2 \3\4; emu_shared_init(\3, sizeof \3);/
s/TILE_ELEMS = PT_CUDA_TILE_ELEMS/TILE_ELEMS = 64 << 10/
