"""The Hugging Face Hub side of the data: the published layout and its Parquet files, push,
and checks of Hub organisation and repository names."""
