# FineTune Studio for Linux GPU hosts.
#   docker build -t finetune-studio .
#   docker run --gpus all -p 127.0.0.1:7860:7860 -v "$PWD/workspace:/workspace" finetune-studio
# Inside the container the app listens on all interfaces (the container's own
# network namespace); publish the port on the host's loopback as above.
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    HF_HOME=/workspace/.hf

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt requirements-gpu.txt requirements-vllm.txt requirements-models.txt ./
# The torch pin resolves to the CUDA build on Linux x86_64.
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps -r requirements-models.txt
# CUDA-only extras (DeepSpeed for ZeRO, ...); and vLLM for `python -m backend.serve --engine vllm`
# in an environment of its own, since it pins another torch. --build-arg GPU_EXTRAS=0 leaves both out.
ARG GPU_EXTRAS=1
RUN if [ "$GPU_EXTRAS" = "1" ]; then /opt/venv/bin/pip install --no-cache-dir -r requirements-gpu.txt \
    && python3 -m venv /opt/vllm && /opt/vllm/bin/pip install --no-cache-dir -r requirements-vllm.txt; fi
ENV PATH=/opt/venv/bin:$PATH \
    FINETUNE_STUDIO_VLLM=/opt/vllm/bin/vllm
# GGUF export: llama.cpp's converter and quantizer from one llama-cpp-python release (as `make gguf-tools`;
# compiled for AVX2, not the build machine's own CPU, so the image runs on any x86-64 host with AVX2).
COPY requirements-gguf.txt ./
ARG LLAMA_CPP_VERSION=0.3.36
RUN CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    pip install --no-cache-dir --no-deps llama-cpp-python==$LLAMA_CPP_VERSION && pip install --no-cache-dir -r requirements-gguf.txt \
 && pip download --no-deps --no-binary :all: llama-cpp-python==$LLAMA_CPP_VERSION -d /tmp/sdist \
 && mkdir -p /opt/venv/share/llama.cpp && tar -xzf /tmp/sdist/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz \
      -C /opt/venv/share/llama.cpp --strip-components=3 \
      llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp/convert_hf_to_gguf.py \
      llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp/convert_lora_to_gguf.py \
      llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp/conversion \
      llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp/gguf-py \
 && echo $LLAMA_CPP_VERSION > /opt/venv/share/llama.cpp/VERSION && rm -rf /tmp/sdist

COPY app.py ./
COPY backend ./backend
COPY ui ./ui

VOLUME /workspace
EXPOSE 7860
CMD ["python", "app.py", "--host", "0.0.0.0", "--allow-remote", "--port", "7860", "--workspace", "/workspace"]
