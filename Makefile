# make install: builds latchkey in release mode and installs the daemon, the
# CLI, the WebDriver intermediary (latchkey-webdriver), the systemd unit, the prompt agent's user unit, the udev rule,
# the service user and a default configuration. Variables: PREFIX (/usr/local), DESTDIR (staging root),
# SYSCONFDIR (/etc), UNITDIR, USERUNITDIR, UDEVDIR, SYSUSERSDIR.
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
UNITDIR ?= $(SYSCONFDIR)/systemd/system
USERUNITDIR ?= $(SYSCONFDIR)/systemd/user
UDEVDIR ?= $(SYSCONFDIR)/udev/rules.d
SYSUSERSDIR ?= $(SYSCONFDIR)/sysusers.d
BINDIR = $(PREFIX)/bin

.PHONY: build install uninstall test

build:
	swift build -c release --product latchkeyd
	swift build -c release --product latchkeyctl
	swift build -c release --product latchkey-webdriver

install: build
	install -D -m 0755 "$$(swift build -c release --show-bin-path)/latchkeyd" "$(DESTDIR)$(BINDIR)/latchkeyd"
	install -D -m 0755 "$$(swift build -c release --show-bin-path)/latchkeyctl" "$(DESTDIR)$(BINDIR)/latchkeyctl"
	install -D -m 0755 "$$(swift build -c release --show-bin-path)/latchkey-webdriver" "$(DESTDIR)$(BINDIR)/latchkey-webdriver"
	sed "s|/usr/local/bin|$(BINDIR)|g" systemd/latchkeyd.service > latchkeyd.service.tmp
	install -D -m 0644 latchkeyd.service.tmp "$(DESTDIR)$(UNITDIR)/latchkeyd.service"
	rm -f latchkeyd.service.tmp
	sed "s|/usr/local/bin|$(BINDIR)|g" systemd/latchkey-agent.service > latchkey-agent.service.tmp
	install -D -m 0644 latchkey-agent.service.tmp "$(DESTDIR)$(USERUNITDIR)/latchkey-agent.service"
	rm -f latchkey-agent.service.tmp
	# the rule runs latchkeyctl udev-owner from where this installs it
	sed "s|/usr/bin/latchkeyctl|$(BINDIR)/latchkeyctl|g" udev/70-latchkey.rules > 70-latchkey.rules.tmp
	install -D -m 0644 70-latchkey.rules.tmp "$(DESTDIR)$(UDEVDIR)/70-latchkey.rules"
	rm -f 70-latchkey.rules.tmp
	install -D -m 0644 packaging/sysusers-latchkey.conf "$(DESTDIR)$(SYSUSERSDIR)/latchkey.conf"
	test -e "$(DESTDIR)$(SYSCONFDIR)/latchkeyd/latchkeyd.toml" || \
		install -D -m 0644 packaging/latchkeyd.toml "$(DESTDIR)$(SYSCONFDIR)/latchkeyd/latchkeyd.toml"
	if [ -z "$(DESTDIR)" ]; then \
		systemd-sysusers "$(SYSUSERSDIR)/latchkey.conf" || true; \
		udevadm control --reload-rules 2>/dev/null || true; \
		udevadm trigger --subsystem-match=misc --sysname-match=uhid 2>/dev/null || true; \
		systemctl daemon-reload 2>/dev/null || true; \
		install -d -m 0700 -o latchkey -g latchkey /var/lib/latchkeyd; \
		$(BINDIR)/latchkeyd --config $(SYSCONFDIR)/latchkeyd/latchkeyd.toml --master-key systemd-credential \
			--seal-master-key || echo "the master key is not sealed: latchkeyd will not start (docs/security.md)"; \
		echo "installed; start it with: systemctl enable --now latchkeyd"; \
	fi

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/latchkeyd" "$(DESTDIR)$(BINDIR)/latchkeyctl" "$(DESTDIR)$(BINDIR)/latchkey-webdriver" \
		"$(DESTDIR)$(UNITDIR)/latchkeyd.service" "$(DESTDIR)$(USERUNITDIR)/latchkey-agent.service" \
		"$(DESTDIR)$(UDEVDIR)/70-latchkey.rules" \
		"$(DESTDIR)$(SYSUSERSDIR)/latchkey.conf"

test:
	scripts/test.sh
