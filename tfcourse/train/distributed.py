"""The processes of a ``tfcourse train`` run under torchrun: the process group (with a
timeout, so a frozen peer cannot hang the job), its teardown, and a check that the
replicas still agree. A plain run is one process and sets up nothing."""

from __future__ import annotations

import datetime
import os

import torch


class Distributed:
    """``torch.distributed`` set up from torchrun's environment, or a single process."""

    def __init__(self, device: torch.device, timeout_seconds: float):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.timeout_seconds = timeout_seconds
        if self.world_size > 1:
            import torch.distributed as dist

            if device.type == "cuda":
                device = torch.device("cuda", local_rank)
                torch.cuda.set_device(device)
            backend = "nccl" if device.type == "cuda" else "gloo"
            # Without a timeout, a frozen process leaves the others waiting forever.
            dist.init_process_group(
                backend=backend, timeout=datetime.timedelta(seconds=timeout_seconds)
            )
            self.backend = backend
        self.device = device
        self.enabled = self.world_size > 1

    def close(self, clean: bool = True):
        if self.enabled and not clean:
            import torch.distributed as dist

            dist.destroy_process_group()  # no barrier: a peer is gone or frozen
        elif self.enabled:
            import torch.distributed as dist

            # Tear down together: rank 0 hosts the rendezvous store, and a rank that
            # destroys its group while rank 0 has already exited can abort at exit.
            # (If a rank failed, torchrun stops the others, so this cannot hang.)
            try:
                dist.barrier()
            finally:
                dist.destroy_process_group()


def params_in_sync(module) -> float:
    """Largest difference between this rank's parameters and rank 0's (collective)."""
    import torch.distributed as dist

    flat = torch.cat([p.detach().flatten() for p in module.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    diff = (flat - reference).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)
