"""The model side: Gemini through google-genai (API key or Vertex AI), the
scripted model, the web search tool, and the models callers bring."""
