# ratios.gp: the chart of tools/bench. Called with
#   gnuplot -e "datafile='...'; outfile='....png'; subtitle='...'" ratios.gp
# datafile rows: "label" lz4_vs_btrfs zstd1_vs_btrfs lz4_vs_plain zstd1_vs_plain
# (NaN where a cell is missing). A bar above the dashed line at 1 = csdfs faster.
set terminal pngcairo size 1500,1000 font "sans,10"
set output outfile
set datafile missing "NaN"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -35 scale 0 nomirror
set grid ytics
set yrange [0:*]
set key top right
set lmargin 10
set bmargin 8

set multiplot layout 2,1 title "csdfs throughput (IOPS, MySQL TPS) relative to btrfs compress=zstd:1 and to a plain directory\n".subtitle
set ylabel "x btrfs-zstd:1"
plot datafile using 2:xtic(1) title "csdfs lz4" lc rgb "#4477aa", \
     '' using 3 title "csdfs zstd:1" lc rgb "#ee6677", \
     1 with lines dt 2 lw 2 lc rgb "black" notitle
set ylabel "x plain directory"
plot datafile using 4:xtic(1) title "csdfs lz4" lc rgb "#4477aa", \
     '' using 5 title "csdfs zstd:1" lc rgb "#ee6677", \
     1 with lines dt 2 lw 2 lc rgb "black" notitle
unset multiplot
