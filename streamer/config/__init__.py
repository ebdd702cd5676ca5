"""Pipeline definitions: typed, validated models of the pipeline YAML (docs/options.md).

Use :func:`load_pipelines` to get models (raises with every problem) or
:func:`validate_file` to get the problems. Option names and defaults live only in
these models; everything downstream (sources, transforms, the runner) reads them.
"""

from streamer.config.loader import check_pipelines, load_pipelines, parse_pipelines, validate_file
from streamer.config.pipeline import (
    EngineConfig,
    ErrorsConfig,
    PipelineConfig,
    PipelinesFile,
    SparkSettings,
    TriggerConfig,
)
from streamer.config.policies import (
    ArchivePolicy,
    CleanPolicy,
    CompactionPolicy,
    CompactionTrigger,
    LogCompactionPolicy,
    PoliciesConfig,
)
from streamer.config.problems import ConfigProblem, ConfigValidationError
from streamer.config.sources import (
    FilesSourceConfig,
    GeneratorSourceConfig,
    KafkaSecurity,
    KafkaSourceConfig,
    SchemaRegistry,
    SourceConfig,
)
from streamer.config.target import KeyGeneratorConfig, TargetConfig
from streamer.config.transforms import TransformConfig
from streamer.config.units import parse_duration, parse_size

__all__ = [
    "ArchivePolicy",
    "CleanPolicy",
    "CompactionPolicy",
    "CompactionTrigger",
    "ConfigProblem",
    "ConfigValidationError",
    "EngineConfig",
    "ErrorsConfig",
    "FilesSourceConfig",
    "GeneratorSourceConfig",
    "KafkaSecurity",
    "KafkaSourceConfig",
    "KeyGeneratorConfig",
    "LogCompactionPolicy",
    "PipelineConfig",
    "PipelinesFile",
    "PoliciesConfig",
    "SchemaRegistry",
    "SourceConfig",
    "SparkSettings",
    "TargetConfig",
    "TransformConfig",
    "TriggerConfig",
    "check_pipelines",
    "load_pipelines",
    "parse_duration",
    "parse_pipelines",
    "parse_size",
    "validate_file",
]
