#!/bin/sh
# The official nginx image's template step: every /etc/nginx/templates/**/*.template is rendered with envsubst
# (only the variables set in the environment are replaced) into NGINX_ENVSUBST_OUTPUT_DIR (default
# /etc/nginx/conf.d) at the same relative path, without the suffix; then the command runs.
set -eu
templates=${NGINX_ENVSUBST_TEMPLATE_DIR:-/etc/nginx/templates}
suffix=${NGINX_ENVSUBST_TEMPLATE_SUFFIX:-.template}
output=${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}
if [ -d "$templates" ]; then
    defined=$(printf '${%s} ' $(awk 'END { for (name in ENVIRON) print name }' </dev/null))
    find "$templates" -follow -type f -name "*$suffix" | while read -r template; do
        relative=${template#"$templates"/}
        target="$output/${relative%"$suffix"}"
        mkdir -p "$(dirname "$target")"
        envsubst "$defined" <"$template" >"$target"
        echo "nginx stand-in: rendered $template to $target"
    done
fi
exec "$@"
