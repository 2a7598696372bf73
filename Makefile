# attention.c: `make` builds the library and the examples into build/,
# `make test` runs the Check suite, then the same suite under ASan+UBSan,
# `make run` trains the toy model on the built-in text and prints a sample,
# `make bench` runs the benchmark workloads. Nothing but libc and libm.
CC      ?= cc
OPT     ?= -O3 -g
# -ffp-contract=off: no multiply-add may be fused, or the random streams and
# the sums stop matching PyTorch bit for bit. Never -ffast-math: it breaks -inf.
STD     := -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off -fno-fast-math
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
INC     := -Itensor -Inn -Ioptim -Iviz
CFLAGS_ALL = $(STD) $(WARN) $(INC) $(OPT) $(CFLAGS)
LDLIBS  := -lm

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -pthread -lm)

LIB_SRC  := $(sort $(wildcard tensor/*.c nn/*.c optim/*.c viz/*.c))
HDRS     := $(wildcard tensor/*.h nn/*.h optim/*.h viz/*.h)
EXAMPLES := article train bench
TEST_SRC := $(sort $(wildcard tests/*.c))

B ?= build
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)

.PHONY: all test deps test-plain test-asan run bench clean valgrind
all: $(B)/libattention.a $(EXAMPLES:%=$(B)/%)

$(B)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(B)/libattention.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/%: examples/%.c $(B)/libattention.a
	$(CC) $(CFLAGS_ALL) -I$(B)/gen $< -o $@ $(B)/libattention.a $(LDFLAGS) $(LDLIBS)

# the reader's page is built from the article's own source text
$(B)/article: $(B)/gen/article_sources.h
$(B)/gen/article_sources.h: examples/article.c nn/attention.c tools/embed_source.c
	@mkdir -p $(dir $@)
	$(CC) -O1 tools/embed_source.c -o $(B)/embed_source
	{ ./$(B)/embed_source article_c_source examples/article.c && \
	  ./$(B)/embed_source attention_c_source nn/attention.c; } > $@.tmp && mv $@.tmp $@

$(B)/tests: $(TEST_SRC) tests/tests.h $(B)/libattention.a $(B)/article $(B)/train
	$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests $(TEST_SRC) -o $@ $(B)/libattention.a $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

test: deps
	@$(MAKE) --no-print-directory test-plain test-asan

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
	$(MAKE) --no-print-directory B=build/asan OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)" build/asan/tests build/asan/bench
	ASAN_OPTIONS=detect_leaks=1 ./build/asan/bench article >/dev/null
	AC_BUILD=build/asan ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/asan/tests

# valgrind over the test suite (each forked test exits non-zero on an error or
# a leak, which Check reports as a failure) and over the examples
VG := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect
valgrind: deps $(B)/tests $(B)/article $(B)/train $(B)/bench
	AC_BUILD=$(B) $(VG) ./$(B)/tests
	$(VG) ./$(B)/article >/dev/null
	$(VG) ./$(B)/train --steps 3 --sample 20 >/dev/null
	$(VG) ./$(B)/bench article >/dev/null

run: $(B)/train
	./$(B)/train

bench: $(B)/bench
	./$(B)/bench

clean:
	rm -rf build
