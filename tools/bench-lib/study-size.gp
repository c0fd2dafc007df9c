# study-size.gp: tools/mysql-study's datadir size chart, one panel per
# (file system, doublewrite). Called with
#   gnuplot -e "dir='...'; outfile='....png'; series='csdfs-lz4-dwOFF plain-dwON ...'; subtitle='...'" study-size.gp
# dir/size-SERIES.dat rows: seconds since the datadir was copied in,
# logical bytes (du --apparent-size), physical bytes (what the file system
# stores: csdfs xattrs, btrfs compsize, else du).
n = words(series)
cols = (n <= 3 ? n : (n <= 6 ? 3 : 4))
rows = int((n + cols - 1) / cols)
set terminal pngcairo size 600 * cols, 380 * rows + 60 font "sans,10"
set output outfile
set grid
set yrange [0:*]
set xlabel "s since the datadir was copied in"
set ylabel "MB"
set key bottom right
set multiplot layout rows, cols title "MySQL datadir size over the run: logical (apparent) vs physical\n".subtitle
do for [i = 1:n] {
	s = word(series, i)
	set title s
	plot dir."/size-".s.".dat" using 1:($2 / 1e6) with lines lw 2 lc rgb "#4477aa" title "logical", \
	     '' using 1:($3 / 1e6) with lines lw 2 lc rgb "#ee6677" title "physical"
}
unset multiplot
