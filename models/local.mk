## models/: built-in model configurations (JSON), installed into $(pkgdatadir)/models
dist_models_DATA += models/gpt3-175b.json models/llama2-7b.json models/llama2-70b.json \
	models/llama3-8b.json models/llama3-70b.json models/llama3-405b.json \
	models/tiny.json models/mixtral-8x7b.json models/mixtral-8x22b.json models/deepseek-v3.json \
	models/qwen2-57b-a14b.json models/qwen3-30b-a3b.json models/qwen3-235b-a22b.json
