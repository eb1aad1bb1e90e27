## man: spsim.1 and spsim-run.1, generated from the programs' --help and --version
## by help2man (Debian's help2man), installed by `make install` (`man spsim`).
## spsim.1 adds a section per command: the what-if's options and each subcommand's.
if HAVE_HELP2MAN
nodist_man1_MANS = man/spsim.1 man/spsim-run.1
CLEANFILES += $(nodist_man1_MANS) man/spsim.h2m
man/spsim.h2m: spsim$(EXEEXT)
	@$(MKDIR_P) man
	$(AM_V_GEN){ echo '[WHAT-IF: spsim PLATFORM.xml]'; echo .nf; ./spsim$(EXEEXT) PLATFORM.xml --help; \
	  for c in topo platform bench verify calibrate; do \
	    echo "[spsim $$c]"; echo .nf; ./spsim$(EXEEXT) $$c --help; done; } | \
	  sed -e 's/\\/\\e/g' -e "s/^\([.']\)\([^n]\)/\\\\\&\1\2/" >$@
man/spsim.1: spsim$(EXEEXT) man/spsim.h2m
	$(AM_V_GEN)$(HELP2MAN) --no-info --section=1 --no-discard-stderr --include=man/spsim.h2m \
	  --name="what-if analysis and verification of parallel LLM training communication on SimGrid" \
	  --output=$@ ./spsim$(EXEEXT)
man/spsim-run.1: spsim-run$(EXEEXT)
	@$(MKDIR_P) man
	$(AM_V_GEN)$(HELP2MAN) --no-info --section=1 --no-discard-stderr \
	  --name="run spsim's lowered programs for real under mpirun (MPI host memory, NCCL + CUDA)" \
	  --output=$@ ./spsim-run$(EXEEXT)
endif
