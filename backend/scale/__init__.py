"""Scale-out beyond one process: sharding engines (FSDP2, DeepSpeed ZeRO),
several machines (torchrun --nnodes) and Ray Train clusters.

guards.py    every refusal of a scale setting, each a sentence naming the fix
engines.py   RunConfig -> the Trainer's fsdp / fsdp_config / deepspeed arguments
launch.py    the argv that starts a run (one process, torchrun, several nodes, Ray)
torchrun.py  torchrun for several nodes, with the join timeout told as a sentence
ray_run.py   the same training session inside ray.train.torch.TorchTrainer
"""
