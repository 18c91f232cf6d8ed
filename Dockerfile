# gemini-split server image: the agent loop as a daemon.
#   docker build -t gemini-split .
#   docker run -p 8443:8443 -e GEMINI_API_KEY \
#     -v $PWD/secrets:/secrets:ro gemini-split \
#     serve --listen 0.0.0.0:8443 --auth-config /secrets/tokens.json \
#           --tls-cert /secrets/cert.pem --tls-key /secrets/key.pem
FROM python:3.11-slim

RUN useradd --create-home --uid 10001 gemini
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gemini_split ./gemini_split
COPY plugins ./plugins
RUN pip install --no-cache-dir . && rm -rf /app/*

USER gemini
EXPOSE 8080 8443
# /health answers without auth on the same port.
HEALTHCHECK --interval=30s --timeout=5s \
  CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=4).status != 200)" || exit 1
ENTRYPOINT ["gemini-split"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--auth-config", "/secrets/tokens.json"]
