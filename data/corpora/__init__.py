"""Every corpus the recipe trains on, in one place: its builder, its row in the corpus table, its settings.

table.py holds CORPUS_TABLE (a row per corpus: its name, i.e. the `dataset` hparam; the function
giving its (train, validation) filelists from a DataConfig and the MelConfig; a one-line summary;
the settings it cannot do without) and DataConfig, the corpus settings, validated against the table.
The builders: demo.py (the embedded tone corpus), espeak.py (English speech spoken by eSpeak NG),
ljspeech.py (LJSpeech-1.1 -> filelists, for scripts/tools/prepare_ljspeech.py) over metadata.py (any
corpus's metadata file or folder of clips -> filelists, for scripts/tools/prepare_filelist.py); generated.py is what the
generated ones share; espeak_engine.py drives eSpeak NG for espeak.py; errors.py holds CorpusError,
the one error type every builder raises. training/ imports this package only, never a builder
(tests/test_architecture.py).

How to add a corpus:
1. write `data/corpora/<name>.py` with a builder that makes or finds its filelists and returns the
   (train, val) paths; a generated one reuses a finished copy with `generated.is_complete`;
2. in table.py, a `<name>_filelists(data, mel)` calling it, its row in CORPUS_TABLE, and any setting
   of its own as a DataConfig field (the hparam of the same name);
3. in hparams.yaml, those settings' keys with a comment, the name in `dataset`'s comment, and a preset
   under `dataset_presets` (at least its output_dir).
Training, `train.py --check` and the data check then work unchanged; its tests go in tests/.
"""

from data.corpora.errors import CorpusError
from data.corpora.table import CORPORA, CORPUS_TABLE, Corpus, DataConfig, corpus_filelists

__all__ = ["CORPORA", "CORPUS_TABLE", "Corpus", "CorpusError", "DataConfig", "corpus_filelists"]
