"""Load instruction data into `Example`s: JSONL, JSON / LLaVA conversations, parquet, HF datasets
and image-folder domain layouts.

Every format is read as a stream of raw records (dicts) with their location; every record is then
converted, given its environment and checked the same way. A record is either *flat*
(`id, image, instruction, target, env, split, ood`) or a *conversation* (`id, image,
conversations: [{from: human|gpt, value}], data_source`), whose every human/gpt pair becomes one
Example with id `"{id}#{turn}"`.

One module per data format (`jsonl`, `json_list`, `parquet`, `hub`, `folder`), registered in
`formats.DATA_FORMATS`; `raw` is the raw record, `convert` turns one into Examples, `checks` gives
them their environment and checks them, `read` runs the whole read, and `options` says how.
"""

from robustvlm.data.loaders.checks import check_new_id
from robustvlm.data.loaders.convert import SPLIT_ALIASES, image_ref, without_image_placeholder
from robustvlm.data.loaders.folder import IMAGE_SUFFIXES
from robustvlm.data.loaders.formats import DATA_FORMATS, DataFormat, detect_format, format_choices
from robustvlm.data.loaders.options import HubSelection, LoadOptions
from robustvlm.data.loaders.raw import RawRecord, Where
from robustvlm.data.loaders.read import load_examples, raw_records, read_examples

__all__ = [
    "DATA_FORMATS",
    "IMAGE_SUFFIXES",
    "SPLIT_ALIASES",
    "DataFormat",
    "HubSelection",
    "LoadOptions",
    "RawRecord",
    "Where",
    "check_new_id",
    "detect_format",
    "format_choices",
    "image_ref",
    "load_examples",
    "raw_records",
    "read_examples",
    "without_image_placeholder",
]
