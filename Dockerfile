# The mkpolicy image: the CLI, with `mkpolicy sidecar` as the production entry point.
#   docker build -t ghcr.io/mkpolicy/mkpolicy:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY mkpolicy ./mkpolicy
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels mkpolicy && rm -rf /wheels
# The shipped policies and the schemas they name (../schemas/crds/...); the deployment
# mounts its policy ConfigMap over /usr/share/mkpolicy/policies, so the paths still resolve.
COPY policies /usr/share/mkpolicy/policies
COPY schemas /usr/share/mkpolicy/schemas
# A numeric non-root user, so that runAsNonRoot can be verified by the kubelet.
USER 65532:65532
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 7081
ENTRYPOINT ["mkpolicy"]
CMD ["--help"]
