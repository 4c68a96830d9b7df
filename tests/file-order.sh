#!/bin/sh
# file-order.sh — inside each source folder, a file calls down to the files it builds on and never
# back: the table below states each folder's files from the bottom up, and a file may use (call, or
# read a table of) only files listed before it, so no folder has an import circle. The calls are
# read from the built objects (nm: what each object defines and what it leaves undefined), so a
# call through a header's prototype counts the same as one through an include; a static function
# or a header's inline one is the file's own. Where two files really share a piece, it goes in the
# lower one (or in a small file of its own below both), or the upper one passes a callback down.
# A file missing from its folder's line, or a line naming a file that is gone, fails the check, so
# a new file must be given its place here. Prints one TAP line per folder and every call upward as
# "caller.c -> callee.c (symbol, ...)". Needs the build tree ($PTRAIN is its ptrain binary); a folder
# whose objects are not built there (cuda/ in a build without CUDA) is skipped, saying so.
. "${PTRAIN_SRCDIR:?set PTRAIN_SRCDIR to the source tree}/tests/tap.sh"
builddir=$(cd "$(dirname "${PTRAIN:?set PTRAIN to the built ptrain}")" && pwd)
cd "$PTRAIN_SRCDIR" || exit 1

order() { # order FOLDER: its files (without .c/.cu), bottom first
    case $1 in
    src/core) echo error shown util log jsonfile ;;
    src/runtime) echo blas_kernel dist signals ;;
    src/backend) echo device nf4 backend arena quant quant_imatrix ;;
    src/cpu) echo dequant dora gdn gdn_bwd gdn_chunk gdn_chunk_bwd dot matmul_rows matmul moe moe_matmul layers layers_bwd attention attention_bwd loss optim comm backend_cpu ;;
    cuda) echo comm scratch dequant dora gdn gdn_bwd gdn_chunk moe lt nccl_id wcache matmul attention_tc attention_tc_bwd attention attention_bwd \
        layers layers_bwd loss optim backend_cuda ;;
    src/model) echo arch family rope gguf gguf_methods safetensors st_index hf_config hfcache resolve \
        hf_tokenizer weight_check load model_share hf_names load_hf model_io ;;
    src/tokenizer) echo tok_utf8 tok_maps template_set spm_proto tok_buf normalize tok_regex tok_norm_align tok_norm \
        tok_spm bpe tok_pretok tok_added tok_load tok_api tok_fingerprint tok_json_base tok_json_spm tok_json \
        tok_pre_names tok_gguf_base tok_gguf_spm tok_gguf tok_spm_config tok_spm_model template_builtin chat_template ;;
    src/template) echo jvalue jjson jlex jparse jobject jfilter jeval jinja jchat ;;
    src/config) echo settings method config_report config_yaml config_keys config_dump config_check config ;;
    src/io) echo safefs filewrite dirlock h5util gguf_write st_write checkpoint checkpoint_read ;;
    src/adapter) echo adapter_select adapter adapter_decomp adapter_h5 adapter_gguf peft adapter_load ;;
    src/forward) echo moe_lora moe_aux moe forward loss tokens sample ;;
    src/data) echo random rows parts label pair pack collate unpaired sampler split stats readme pattern splits source row_list csv parquet_meta parquet_types parquet reader format cache_key \
        cache_write cache_read dataset chat_apply ;;
    src/export) echo gguf_meta hf_meta merge merge_experts imatrix merged_gguf merged_hf ollama export_cmd ;;
    src/hub) echo hub_token hub_http hub_files hub_json hub_card hub_stage hub_jobs hub_api hub_report \
        hub_worker hub_push_cmd ;;
    src/watch) echo crc32c protobuf tfevents runlog heartbeat plot_axes plot watch_ckpt plot_cmd status_print \
        status ;;
    src/train) echo grpo reward preference schedule lora_moe_names lora optimizer score_head saved_modules backward step lora_state finite config_options memplan progress \
        gradsync data_agree resume outdir train_data train_load train_startup train_watch train_hub train_ckpt grpo_step grpo_eval train ;;
    src/cmd) echo generate inspect tokenize score main ;;
    esac
}
folders="src/core src/runtime src/backend src/cpu cuda src/model src/tokenizer src/template src/config src/io src/adapter \
src/forward src/data src/export src/hub src/watch src/train src/cmd"

# every folder with sources is in the table
for dir in src/* cuda; do
    [ -d "$dir" ] || continue
    case " $folders " in *" $dir "*) ;; *) expect_eq "$dir has a line in tests/file-order.sh" "" "$dir" ;; esac
done

for dir in $folders; do
    stated=$(order "$dir")
    actual=$(find "$dir" -maxdepth 1 \( -name '*.c' -o -name '*.cu' \) | sed 's|.*/||; s|\.cu*$||' | sort)
    missing=$(for f in $actual; do case " $stated " in *" $f "*) ;; *) echo "$f" ;; esac; done)
    gone=$(for f in $stated; do echo "$actual" | grep -qx "$f" || echo "$f"; done)
    if [ -n "$missing$gone" ]; then
        expect_eq "$dir: the stated order names its files" "" \
            "$(echo "$missing" | sed '/^$/d; s/^/not in the table: /')$(echo "$gone" | sed '/^$/d; s/^/no such file: /')"
        continue
    fi
    objs="" unbuilt=""
    for f in $stated; do
        if [ -f "$builddir/$dir/$f.o" ]; then objs="$objs $f"; else unbuilt="$unbuilt $f"; fi
    done
    if [ -n "$unbuilt" ]; then
        skip_test "$dir: every file calls only the files below it" "not built in $builddir (${unbuilt# })"
        continue
    fi
    ext=c
    [ "$dir" = cuda ] && ext=cu
    up=$(for f in $objs; do nm "$builddir/$dir/$f.o" | sed "s|^|$f |"; done | awk -v order="$stated" -v ext="$ext" '
        BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
        NF == 4 && $3 ~ /^[TDBRVWCG]$/ { def[$4] = $1 }   # "file addr T sym": defined here
        NF == 3 && $2 == "U" { use[++k] = $1 " " $3 }     # "file U sym": used here
        END {
            for (i = 1; i <= k; i++) {
                split(use[i], p, " ")
                if (!(p[2] in def)) continue
                callee = def[p[2]]
                if (callee != p[1] && rank[callee] > rank[p[1]]) bad[p[1] "." ext " -> " callee "." ext] = bad[p[1] "." ext " -> " callee "." ext] " " p[2]
            }
            for (e in bad) print e " (" substr(bad[e], 2) ")"
        }' | sort)
    expect_eq "$dir: every file calls only the files below it" "" "$up"
done
done_testing
