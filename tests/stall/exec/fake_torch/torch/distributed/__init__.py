from .distributed_c10d import *  # noqa: F401,F403 (as torch.distributed does)
