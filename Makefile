# hetps — one build for the parameter server, the worker and the front door.
#
#   make              bin/hetps-ps bin/hetps-worker bin/hetps
#   make SANITIZE=1   the same with ASan+UBSan (objects under build/san)
#   make test         install missing packages, build, run every test
#   make run          install missing packages, build, train the reference job
#                     (EPOCHS=N: fewer epochs; MODE=sync|ssp:S: another mode)
#   make bench        benchmarks (tests/bench/)
#   make image        the runtime image hetps:latest (deploy/Dockerfile;
#                     image-gpu: hetps:gpu with cuBLAS)
#   make test-deploy  images and Compose with a real Docker daemon
#                     (tests/deploy/; also part of make test)
#   make install      PREFIX/bin, PREFIX/share/hetps (models, examples,
#                     deploy files); PREFIX=/usr/local, DESTDIR= for packages
#   make fuzz         libFuzzer targets (tests/fuzz/, clang, ASan+UBSan under
#                     build/fuzz), each run FUZZ_SECONDS (default 60) on its corpus
#
# Sources are found by wildcard: common/*.c make libcommon, ps/*.c libps,
# worker/*.c libworker (each main.c excepted), worker/hetps/*.c the front
# door bin/hetps, tests/unit/test_*.c one CUnit program each, tests/tools/*.c one helper
# program each.

CC       ?= cc
SANITIZE ?=
# FUZZ=1 (set by `make fuzz`): clang, every object instrumented for libFuzzer
# with ASan+UBSan, under build/fuzz; only the fuzz targets are linked.
FUZZ     ?=
ifneq ($(FUZZ),)
CC       := clang
SANITIZE := 1
endif
FLAVOUR  := $(if $(FUZZ),fuzz,$(if $(SANITIZE),san,rel))
B        := build/$(FLAVOUR)
GEN      := build/proto

SAN      := -fsanitize=address,undefined
OPT      := $(if $(SANITIZE),-O1 $(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=undefined,-O2)
OPT      += $(if $(FUZZ),-fsanitize=fuzzer-no-link)
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)
CFLAGS   += -std=c11 -D_GNU_SOURCE -g $(OPT) -Wall -Wextra -Werror -Wshadow \
            -Wstrict-prototypes -Wmissing-prototypes -I. -Icommon -I$(GEN) \
            -I/usr/include/cjson $(BLAS_CFLAGS) -MMD -MP
LDFLAGS  += $(if $(SANITIZE),$(SAN))
LDLIBS   += -lnng -lssl -lcrypto -lprotobuf-c -llmdb -lcjson -lz -lisal $(BLAS_LIBS) -lm -lpthread
# Keras's files (common/keras*.c): Debian's serial HDF5 (its own include and
# library folders, which pkg-config names) and libzip.
HDF5_CFLAGS := $(or $(shell pkg-config --cflags hdf5 2>/dev/null),-I/usr/include/hdf5/serial)
HDF5_LIBS   := $(or $(shell pkg-config --libs hdf5 2>/dev/null),-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)
CFLAGS   += $(HDF5_CFLAGS)
LDLIBS   += $(HDF5_LIBS) -lzip

# CUDA is detected, not required. With nvcc, worker/*.cu (the CUDA backend)
# join libworker and -DHETPS_CUDA is set; the CUDA runtime is linked
# statically and cuBLAS is loaded with dlopen at run time, so the binaries
# start on machines without a GPU, a driver or CUDA libraries. NVCC= (empty)
# forces a CPU-only build. SANITIZE=1 builds are CPU-only: ASan's shadow
# memory and the CUDA driver do not mix (it needs protect_shadow_gap=0).
ifeq ($(origin NVCC),undefined)
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
# nvcc may be a wrapper script (/usr/local/bin/nvcc → exec …/cuda-13.0/bin/nvcc):
# ask nvcc itself where its toolkit is (TOP in --dryrun), not its path.
CUDA_HOME := $(if $(NVCC),$(realpath $(shell $(NVCC) --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p' | head -n 1)))
CUDART    := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a \
               $(CUDA_HOME)/targets/x86_64-linux/lib/libcudart_static.a))
CUDA_SRC  := $(if $(CUDART),$(if $(SANITIZE),,$(wildcard worker/*.cu)))
GENCODE   := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -std=c++17 -g -O2 $(GENCODE) -Xcompiler -Wall,-Wextra,-Werror \
             -I. -Icommon -I$(GEN)
ifneq ($(CUDA_SRC),)
CFLAGS   += -DHETPS_CUDA
LDLIBS   += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib \
            -lcudart_static -lstdc++ -ldl -lrt -lpthread
endif

PROTOS     := $(wildcard proto/*.proto)
PROTO_C    := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PROTO_H    := $(PROTO_C:.c=.h)
COMMON_SRC := $(wildcard common/*.c) $(PROTO_C)
HETPS_SRC  := $(wildcard worker/hetps/*.c)
PS_SRC     := $(filter-out ps/main.c,$(wildcard ps/*.c))
WORKER_SRC := $(filter-out worker/main.c,$(wildcard worker/*.c))
TEST_SRC   := $(wildcard tests/unit/test_*.c)
TEST_HELPERS := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TOOL_SRC   := $(wildcard tests/tools/*.c)
BENCH_SRC  := $(wildcard tests/bench/*.c)
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIBCOMMON := $(B)/libcommon.a
LIBPS     := $(B)/libps.a
LIBWORKER := $(B)/libworker.a
BINS      := bin/hetps-ps bin/hetps-worker bin/hetps
TESTS     := $(patsubst tests/unit/%.c,$(B)/tests/%,$(TEST_SRC))
TOOLS     := $(patsubst tests/tools/%.c,$(B)/tools/%,$(TOOL_SRC))
BENCHES   := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_SRC))
FUZZERS   := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))

.PHONY: all deps test test-faults test-deploy image image-gpu run bench fuzz fuzzers clean check-cuda install uninstall
all: check-cuda $(BINS) $(TESTS) $(TOOLS) $(BENCHES)

check-cuda:
	@if [ -n "$(CUDA_SRC)" ]; then echo "nvcc: found (sm_80, sm_90 + PTX): $(NVCC)"; \
	 elif [ -n "$(NVCC)" ] && [ -z "$(CUDART)" ]; then echo "nvcc: found ($(NVCC)), but no libcudart_static.a under '$(CUDA_HOME)': CPU-only build"; \
	 elif [ -n "$(NVCC)" ]; then echo "nvcc: found, but SANITIZE=1 builds are CPU-only"; \
	 else echo "nvcc: not found: CPU-only build"; fi

# The binaries record which flavour built them, so switching SANITIZE relinks.
build/flavour: FORCE
	@mkdir -p build; [ "$$(cat $@ 2>/dev/null)" = "$(FLAVOUR)" ] || echo $(FLAVOUR) > $@
FORCE:

# device.c is the one C file that reads HETPS_CUDA: rebuild it when the
# choice changes (nvcc found or not, NVCC= given).
$(B)/cuda.stamp: FORCE
	@mkdir -p $(B); [ "$$(cat $@ 2>/dev/null)" = "cuda=$(if $(CUDA_SRC),1,0)" ] || echo "cuda=$(if $(CUDA_SRC),1,0)" > $@
$(B)/obj/worker/device.o: $(B)/cuda.stamp

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(GEN)
	protoc-c --proto_path=proto --c_out=$(GEN) $<

# Every object may include the generated headers.
$(B)/obj/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/obj/%.o: %.cu $(PROTO_H)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

$(B)/obj/$(GEN)/%.pb-c.o: $(GEN)/%.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Wmissing-prototypes -Wshadow,$(CFLAGS)) -Wno-unused-parameter -c -o $@ $<

$(LIBCOMMON): $(call obj,$(COMMON_SRC))
$(LIBPS): $(call obj,$(PS_SRC))
$(LIBWORKER): $(call obj,$(WORKER_SRC)) $(patsubst %.cu,$(B)/obj/%.o,$(CUDA_SRC))
$(B)/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

bin/hetps-ps: $(call obj,ps/main.c) $(LIBPS) $(LIBCOMMON) build/flavour
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)
bin/hetps-worker: $(call obj,worker/main.c) $(LIBWORKER) $(LIBCOMMON) build/flavour
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)
bin/hetps: $(call obj,$(HETPS_SRC)) $(LIBWORKER) $(LIBCOMMON) build/flavour
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)

$(B)/tests/%: $(call obj,tests/unit/%.c) $(call obj,$(TEST_HELPERS)) $(LIBPS) $(LIBWORKER) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -lcunit $(LDLIBS)
# nfdelay holds packets of a netfilter queue (tests/faults/): its own library.
$(B)/tools/nfdelay: $(call obj,tests/tools/nfdelay.c)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -lnetfilter_queue -lnfnetlink
$(B)/tools/%: $(call obj,tests/tools/%.c) $(LIBPS) $(LIBWORKER) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)
$(B)/bench/%: $(call obj,tests/bench/%.c) $(LIBPS) $(LIBWORKER) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)
$(B)/fuzz/%: $(call obj,tests/fuzz/%.c) $(LIBPS) $(LIBWORKER) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o %.a,$^) $(LDLIBS)
fuzzers: $(FUZZERS)
.SECONDARY: $(call obj,$(FUZZ_SRC))

# Set-up: install what is missing (quiet when all is there), then build.
deps:
	@./deploy/install-deps.sh

# The fuzz targets (clang's libFuzzer) join as smoke runs when clang is there.
test: deps
	@$(MAKE) --no-print-directory all
	@if command -v clang >/dev/null 2>&1; then $(MAKE) --no-print-directory FUZZ=1 fuzzers; \
	 else echo "clang: not found: the fuzz smoke runs are skipped"; fi
	@HETPS_BUILD=$(B) ./tests/run.sh

# Only the network-fault tests (tests/faults/, as root); `make test` runs them too.
test-faults: deps
	@$(MAKE) --no-print-directory all
	@HETPS_BUILD=$(B) TESTS=netns ./tests/run.sh

# Images need a Docker daemon (deploy/image.sh; BASE=debian:bookworm-slim
# where a registry is reachable, else a local debootstrap minbase).
image: all
	@./deploy/image.sh
image-gpu: all
	@./deploy/image.sh --gpu

# Only the deployment tests (tests/deploy/: Docker, Compose; as root).
test-deploy: deps
	@$(MAKE) --no-print-directory all
	@HETPS_BUILD=$(B) TESTS=deploy ./tests/run.sh

EPOCHS ?= 10
run: deps
	@$(MAKE) --no-print-directory all
	./bin/hetps launch $(if $(MODE),--mode $(MODE)) deploy/cluster.local.json -- --model deploy/models/fashion_cnn.json --epochs $(EPOCHS)
	@./bin/hetps plot hetps-data/logs -o hetps-data/logs/run.png

bench: deps
	@./deploy/install-deps.sh --bench
	@$(MAKE) --no-print-directory all
	@HETPS_BUILD=$(B) ./tests/bench/run.sh

# Bare metal: the three programs (hetps finds the other two beside it), the
# models, the example cluster file and the deploy files, the systemd unit
# and the sbatch script with their paths set to PREFIX.
PREFIX  ?= /usr/local
SHARE   := $(DESTDIR)$(PREFIX)/share/hetps
install: $(BINS)
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE)/models/keras $(SHARE)/examples \
	    $(SHARE)/systemd $(SHARE)/slurm $(SHARE)/k8s
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 deploy/models/*.json $(SHARE)/models/
	install -m 644 deploy/models/keras/*.json $(SHARE)/models/keras/
	install -m 644 deploy/cluster.local.json $(SHARE)/examples/
	install -m 644 deploy/k8s/*.yaml deploy/k8s/schema.json $(SHARE)/k8s/
	install -m 755 deploy/k8s/validate.py $(SHARE)/k8s/
	sed 's|/usr/local/|$(PREFIX)/|g' deploy/systemd/hetps-ps@.service > $(SHARE)/systemd/hetps-ps@.service
	sed 's|/usr/local/|$(PREFIX)/|g' deploy/slurm/train.sbatch > $(SHARE)/slurm/train.sbatch
	chmod 644 $(SHARE)/systemd/hetps-ps@.service
	chmod 755 $(SHARE)/slurm/train.sbatch
	@echo "installed under $(DESTDIR)$(PREFIX): bin/hetps, bin/hetps-ps, bin/hetps-worker, share/hetps/"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(BINS)))
	rm -rf $(SHARE)

# Each libFuzzer target for FUZZ_SECONDS on a copy of its corpus
# (tests/fuzz/corpus/NAME); findings are left in build/fuzz/findings.
FUZZ_SECONDS ?= 60
fuzz: deps
	@$(MAKE) --no-print-directory FUZZ=1 fuzzers
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./tests/fuzz/run.sh

clean:
	rm -rf build bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
