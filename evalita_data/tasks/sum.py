"""Fanpage news summarization (Landro et al. 2022)."""

from ..scoring.metrics import ROUGE1, ROUGE2, ROUGE_L, ROUGE_LSUM

from ..taskspec import HubSplits, TaskSpec, two_gen_prompts

TASK = TaskSpec(
    id="sum",
    title="Summarization (Fanpage)",
    source="Fanpage.it articles and summaries (Landro et al. 2022; ARTeLab/fanpage on the Hugging Face Hub)",
    license="unknown (the source card states none)",
    citation="Landro N., Gallo I., La Grassa R., Federici E. (2022). Two New Datasets for Italian-Language Abstractive "
             "Text Summarization. Information 13(5):228.",
    homepage="https://www.mdpi.com/2078-2489/13/5/228",
    obtain_hint="Run `evalita-data fetch sum` (downloads ARTeLab/fanpage from the Hugging Face Hub into "
                "raw/sum/fanpage.csv).",
    converter="sum:convert",
    schema="sum",
    paper_splits={"train": 8436, "test": 100},
    id_field=None,
    output_type="generate_until",
    target="{{ target }}",
    prompts=two_gen_prompts(
        "Devi risolvere un compito di sintesi automatica del testo. ",
        "Riassumi il seguente articolo di giornale: '{{source}}'\nRiassunto:",
    ),
    metrics=[ROUGE1, ROUGE2, ROUGE_L, ROUGE_LSUM],
    gold_field="target",
    order=9,
    eval_split="test",
    fewshot_split="train",
    stop=["</s>"],
    max_new_tokens=256,
    # The sample itself uses the fixed converters.sum.SAMPLE_SEED: --seed never changes the test set.
    seed=1234,
    task_categories=["summarization"],
    hub_splits=HubSplits("summarization-fp", test="test_100", fewshot_not_ours=(
        "the official dev split is not documented, and fanpage's own validation split is not built (our few-shot split "
        "is a train sample)")),
    # `evalita-data fetch sum`: ARTeLab/fanpage through huggingface_hub.
    fetcher="building.fetch:fetch_fanpage",
)
