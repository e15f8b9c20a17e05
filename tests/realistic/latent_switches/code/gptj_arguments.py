"""The fine-tuning script's switches, parsed by ``HfArgumentParser``."""

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelArguments:
    model_name: str = field(default="EleutherAI/gpt-j-6B", metadata={"help": "The model to fine-tune."})


@dataclass
class TrainingArgs:
    epochs: int = field(default=1, metadata={"help": "Passes over the data."})
    learning_rate: float = 1e-5
    fp16: bool = field(default=False, metadata={"help": "Train in 16-bit floats."})
    full_optimizer_state: bool = field(
        default=False, metadata={"help": "Also save the whole optimizer state at the end."}
    )
    output_dir: Optional[str] = field(default="/opt/ml/model")
