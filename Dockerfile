# GPU image for train.py and the paper-reproduction scripts (docs/gpu.md, "Docker").
#   docker build -t tacotron2-batching .
#   docker run --gpus all -v /path/to/LJSpeech-1.1:/data/LJSpeech-1.1:ro -v $PWD/runs:/workspace/runs \
#       tacotron2-batching scripts/reproduction/table2.sh --only RAND
# The base image's PyTorch is the only torch in the image: requirements-docker.txt is
# requirements.txt without torch, and the build fails if installing it would change torch.
# BASE_IMAGE: any image with `python` and `pip` on the PATH and a torch the recipe supports
# (>= 2.11); `make docker-check` builds on a local Debian base with this machine's CPU torch.
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHON=python \
    MPLBACKEND=Agg

WORKDIR /workspace

COPY requirements-docker.txt .
RUN python -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > /tmp/torch-pin.txt \
 && pip install -r requirements-docker.txt -c /tmp/torch-pin.txt \
 && python -c "import torch; print('torch==' + torch.__version__.split('+')[0])" | cmp - /tmp/torch-pin.txt

COPY . .

# Mount LJSpeech at /data/LJSpeech-1.1 (read-only is fine), and host folders at /workspace/runs
# (run directories, filelists) and /workspace/.cache (the mel cache) to keep them between runs.
CMD ["python", "train.py", "--help"]
