# False-deny share of requests against the sketch's load (bench/sketch/run.sh).
# gnuplot -e "data='load.dat'; png='out.png'" plot.gp
set terminal pngcairo size 900,560 font "sans,11"
set output png
set logscale xy
set xlabel "sketch load: admitted requests per window / (width x L)"
set ylabel "false denials (share of requests)"
set format y "%.0e"
set termoption noenhanced
set key top left
set grid
set title "sketch (depth 4) vs the exact sliding_window_counter, decision by decision (1e-7: none seen)"
stats data nooutput
plot for [i=0:STATS_blocks-1] data index i using 1:2 with linespoints title columnheader(1)
