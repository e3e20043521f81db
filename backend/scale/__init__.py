"""The scale-out plan: pure functions over a RunConfig and the devices, for
sharding engines (FSDP2, DeepSpeed ZeRO), several machines (torchrun --nnodes)
and Ray Train clusters. What runs them lives above: the several-node launcher
in backend/runs/torchrun.py, the Ray driver in backend/training/ray_run.py.

guards.py    every refusal of a scale setting, each a sentence naming the fix
engines.py   RunConfig -> the Trainer's fsdp / fsdp_config / deepspeed arguments
launch.py    the argv that starts a run (one process, torchrun, several nodes, Ray)
"""
