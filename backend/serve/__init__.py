"""Serve a run's base and checkpoints behind an OpenAI-compatible API.

cli.py        python -m backend.serve: flags, refusals (exit 2), socket, engine choice
server.py     load the models, run uvicorn, report to the UI's progress file
app.py        FastAPI routes, API key + body-size guard, OpenAI error shape
hosts.py      the addresses listened on and answered as (Host and Origin checks), the base URL
protocol.py   request bodies -> checked values; ApiError names the field
prompts.py    token ids: chat template or a plain / token-id completion prompt
job.py        one request's job: the RequestJob, its generation settings, its prompt fitted to the context
bridge.py     bounded queue + one generation thread on the ChatEngine; stop strings
batching.py   waiting greedy requests answered by one generate call (--max-batch)
scored.py     requests answered token by token: logprobs, echo, several prompts
logprobs.py   log-softmax of the raw logits: prompts scored in one forward pass
responses.py  completion bodies and server-sent event chunks
names.py      served names: base, checkpoint-<step>, final (re-read from disk); --gguf: the file's stem
vllm.py       --engine vllm: vLLM's environment (CPU or CUDA build) and its server's command
server_job.py start / stop / read a server as a background job (for the UI)

Nothing is imported here: the UI imports server_job.py without torch or FastAPI.
"""
