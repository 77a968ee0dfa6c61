"""A stand-in for torch in tests/stall/exec/job_rank.py --init-hangs: only torch.distributed's
init_process_group, which waits forever (a peer that never comes), so that a test sees a rank
stuck there without importing the real torch (5-8 s a process)."""
