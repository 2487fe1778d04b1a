"""The fake's ``vllm.inputs`` (see the package)."""


class TokensPrompt(dict):
    def __init__(self, prompt_token_ids):
        super().__init__(prompt_token_ids=prompt_token_ids)
