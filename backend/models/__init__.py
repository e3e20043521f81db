"""Models and the machine they run on.

loading.py    resolve a name or folder (the folder a GGUF file converts into), check a model folder, load a model
              (4/8-bit, dtype) and its tokenizer, with sentences on failure
presets.py    the model presets the Train tab offers (sizes, layers, chat templates)
demo.py       build the offline demo model (tokenizer + tiny Llama) into the workspace
demo_facts.py the demo model's facts: its pre-training corpus, the demo rows and DEMO_PROMPTS
gguf_source.py  a GGUF file checked and converted once into a Hugging Face folder
gguf_header.py  a GGUF header walked with every count checked against the file's size, before gguf's reader
offline.py    the real pretrained models shipped as GGUF files in registry packages
hardware.py   detect devices, choose training devices, CUDA_VISIBLE_DEVICES for a launch
memory.py     the memory estimate of a run (weights, adapters, optimizer, activations, logits, shards)
memory_advice.py  what to change when a run does not fit or ran out of memory, each change with its estimate
hub_cache.py  find a hub model in the local Hugging Face cache (export of hub-model runs)
local/        the models other tools keep on this machine (HF cache, Ollama, LM Studio, llama.cpp, added
              folders), scanned read-only and bounded; `python -m backend.models list` (__main__.py)
chat_templates.py  the chat template a run trains with (own, known, ChatML added), its EOS, the stop ids,
                   a chat rendered through a tokenizer's template
greedy.py     greedy, batched answers to conversations: the one generation loop of replay, the held-out
              scores, evaluation and export verification
"""
