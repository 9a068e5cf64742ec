"""Pure @triton.jit kernels (no DGL import). Installed as dgl_accel.kernels."""
