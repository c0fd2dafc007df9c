# study-tps.gp: tools/mysql-study's TPS chart, one panel per workload. Called with
#   gnuplot -e "dir='...'; outfile='....png'; wls='ro wo rw'; ncol=N;
#     colors='#4477aa ...'; dashes='2 1 ...'; subtitle='...'" study-tps.gp
# (colors and dashes: one word per series: the file system's colour, dash
# type 2 for doublewrite OFF)
# dir/tps-WL.dat: a header line ("threads" then one quoted name per series,
# "fs dw=ON|OFF"), then one row per thread count with the TPS of each series
# (NaN where a cell is missing or failed).
set terminal pngcairo size 1800,650 font "sans,11"
set output outfile
set datafile missing "NaN"
set key autotitle columnhead
set grid
set yrange [0:*]
set xlabel "sysbench threads"
set ylabel "transactions per second"
set key top left font "sans,9"
set pointsize 1.3
name(w) = (w eq "ro" ? "read-only" : w eq "wo" ? "write-only" : "read-write")
# dashed = doublewrite OFF
nw = words(wls)
set multiplot layout 1, nw title "MySQL on csdfs and its peers, seeds/003 schema: TPS by thread count (dashed: doublewrite OFF)\n".subtitle
do for [w = 1:words(wls)] {
	f = dir."/tps-".word(wls, w).".dat"
	set title name(word(wls, w))
	plot for [c = 2:ncol] f using 1:c:xtic(1) with linespoints lw 2 pt (c % 7 + 1) lc rgb word(colors, c - 1) dt int(word(dashes, c - 1))
}
unset multiplot
