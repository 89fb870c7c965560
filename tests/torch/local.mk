# SPDX-License-Identifier: MIT
# torch.distributed backend "coll" (bindings/torch): skipped (77) without Debian's PyTorch.
dist_check_SCRIPTS += tests/torch/test_torch.sh
TESTS += tests/torch/test_torch.sh
EXTRA_DIST += tests/torch/test_torch_backend.py bindings/torch/coll_torch.cpp \
    bindings/torch/__init__.py bindings/torch/setup.py bench/torch_ddp_bench.py \
    bench/torch_ddp_bench.sh
