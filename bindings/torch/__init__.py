# SPDX-License-Identifier: MIT
"""torch.distributed backend "coll" on libcoll: import this module, then
torch.distributed.init_process_group(backend="coll", ...)."""
import torch.distributed as dist

from . import _coll_torch

if not hasattr(dist.Backend, "COLL"):
    dist.Backend.register_backend("coll", _coll_torch.create_process_group)
