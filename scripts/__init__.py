"""The recipe's commands beside the library, in rooms: tools/ (prepare a corpus, synthesize),
reproduction/ (the paper's tables), bench/ (measurements) and release/ (the GPU check, offline
install, Docker). Each runs from the checkout's root as `python -m scripts.ROOM.NAME`."""
