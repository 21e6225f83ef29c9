#!/usr/bin/env bash
# Run HERE (Debian 12, Open MPI 4.1.4 installed): packs this machine's Open MPI into
# .dev/ompi.tar.xz for the GPU machine, which has no MPI and no network. There:
#   tar -xJf .dev/ompi.tar.xz -C .dev && B=$PWD/.dev/ompi && source .dev/ompi/env.sh
# then `orterun --allow-run-as-root -n 2 .dev/supercell ...` (mpirun). The bundle is
# relocated through Open MPI's OPAL_* variables; only the shared-memory and self
# transports are enabled (one host). Checked here by hiding the system's copy in a mount
# namespace (unshare -m) and running two ranks from the bundle.
set -euo pipefail
B=$(mktemp -d)/ompi
mkdir -p "$B/bin" "$B/lib" "$B/share" "$B/pmix"
O=/usr/lib/x86_64-linux-gnu/openmpi
L=/lib/x86_64-linux-gnu
cp -L /usr/bin/orterun "$B/bin/"
for l in libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libevent_core-2.1.so.7 \
  libevent_pthreads-2.1.so.7 libevent-2.1.so.7 libhwloc.so.15 libudev.so.1 libz.so.1; do
  cp -L "$L/$l" "$B/lib/"
done
cp -rL "$O/lib/openmpi3" "$B/lib/openmpi3"
cp -rL /usr/lib/x86_64-linux-gnu/pmix2/lib "$B/pmix/lib"
cp -rL /usr/share/openmpi "$B/share/openmpi"
cp -rL /etc/openmpi "$B/etc"
cat >"$B/env.sh" <<'ENV'
# Source with B set to the unpacked bundle's directory.
export PATH=$B/bin:$PATH
export LD_LIBRARY_PATH=$B/lib:$B/pmix/lib:${LD_LIBRARY_PATH:-}
export OPAL_PREFIX=$B OPAL_EXEC_PREFIX=$B OPAL_BINDIR=$B/bin OPAL_LIBDIR=$B/lib
export OPAL_DATADIR=$B/share OPAL_PKGDATADIR=$B/share/openmpi OPAL_SYSCONFDIR=$B/etc
export OMPI_MCA_mca_base_component_path=$B/lib/openmpi3
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=sm,pt2pt
export PMIX_MCA_mca_base_component_path=$B/pmix/lib/pmix
export PMIX_INSTALL_PREFIX=$B/pmix PMIX_PREFIX=$B/pmix
export PMIX_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_pcompress_base_silence_warning=1
ENV
mkdir -p .dev
tar -cJf .dev/ompi.tar.xz -C "$(dirname "$B")" ompi
rm -rf "$(dirname "$B")"
ls -la .dev/ompi.tar.xz
